import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { z } from "zod";
import { Executor } from "@/lib/executor";
import { git } from "@/lib/git/run";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { getRunState } from "@/lib/db/event-store";
import { modelCallsForRun } from "@/lib/dashboard/costs";
import { startRun } from "@/lib/runs/service";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { createSandbox } from "@/lib/sandbox";
import type { SessionUser } from "@/lib/auth/guard";
import { inngest } from "@/inngest";
import * as decide from "@/inngest/decide";
import { ownAppTarget } from "@/inngest/embedded";
import { runCancelled, runStarted } from "@/inngest/events";

/*
 * The eval harness behind `npm run eval`: a versioned set of toy repositories with tasks and hidden checks
 * (scripts/eval/tasks/*.json), run through the real workflow — the embedded executor, the configured models, the
 * sandbox, real git — with every stage on `auto`. Whatever still needs a person is decided by the harness the way a
 * hands-off reviewer would (approve a plan, skip a question, accept a failed validation) and counted as an
 * intervention. The hidden check then runs in a sandbox on the delivered branch; the model never sees it.
 */

export const evalTaskSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9-]+$/, "must be lower-case letters, digits and dashes"),
  description: z.string(),
  /** The toy repository: path → content. */
  files: z.record(z.string(), z.string()),
  /** What the models get. */
  request: z.string().min(1),
  /** What the demo model gets instead (with its instruction markers), when every stage runs on demo:*. */
  demoRequest: z.string().optional(),
  /** Extra run config (merged under the harness's trust mode and routing). */
  config: z.record(z.string(), z.unknown()).optional(),
  /** A shell command line run in the delivered branch's checkout (sandboxed); exit 0 = solved. */
  check: z.string().min(1),
});
export type EvalTask = z.infer<typeof evalTaskSchema>;

export type Routing = { planner: string; implementer: string; validator: string };

export type EvalResult = {
  task: string;
  /** How the run ended: completed, failed, cancelled, or timeout. */
  status: string;
  /** The hidden check passed on the delivered branch. */
  solved: boolean;
  checkOutput: string;
  interventions: number;
  costUsd: number;
  tokens: number;
  modelCalls: number;
  seconds: number;
};

export const TASKS_DIR = path.join(import.meta.dirname, "tasks");

export function loadTasks(dir = TASKS_DIR, only: string[] = []): EvalTask[] {
  const tasks = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => {
      const parsed = evalTaskSchema.safeParse(JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
      if (!parsed.success) throw new Error(`${f}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
      if (`${parsed.data.id}.json` !== f) throw new Error(`${f}: its id is "${parsed.data.id}"; name the file after it.`);
      return parsed.data;
    });
  const unknown = only.filter((id) => !tasks.some((t) => t.id === id));
  if (unknown.length) throw new Error(`No such eval task: ${unknown.join(", ")} (see ${dir})`);
  return only.length ? tasks.filter((t) => only.includes(t.id)) : tasks;
}

function makeRepo(task: EvalTask): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `gatehouse-eval-${task.id}-`));
  for (const [file, content] of Object.entries(task.files)) {
    const target = path.resolve(dir, file);
    if (!target.startsWith(`${dir}${path.sep}`)) throw new Error(`${task.id}: file path ${file} leaves the repository`);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content);
  }
  return (async () => {
    await git(dir, ["init", "-q", "-b", "main"]);
    await git(dir, ["add", "-A"]);
    await git(dir, ["commit", "-q", "-m", `eval task ${task.id}`]);
    return dir;
  })();
}

const isDemo = (routing: Routing) => [routing.planner, routing.implementer, routing.validator].every((m) => m.startsWith("demo:"));

/** Drive one run to its end, deciding for it whatever waits for a person; returns how many decisions that took. */
async function driveToEnd(user: SessionUser, runId: string, deadline: number): Promise<{ status: string; interventions: number }> {
  let interventions = 0;
  const handled = new Set<string>();
  while (Date.now() < deadline) {
    const state = await getRunState({ id: runId });
    if (!state) throw new Error(`run ${runId} vanished`);
    if (state.status === "completed" || state.status === "failed" || state.status === "cancelled") return { status: state.status, interventions };
    const gate = state.pendingGate;
    const question = state.pendingClarification;
    if (state.status === "awaiting_approval" && gate && !handled.has(gate.gateId)) {
      handled.add(gate.gateId);
      interventions++;
      await decide.approve({ user, runId, input: { gateId: gate.gateId } });
    } else if (state.status === "awaiting_fix_decision" && gate && !handled.has(gate.gateId)) {
      handled.add(gate.gateId);
      interventions++;
      await decide.fix({ user, runId, input: { gateId: gate.gateId, decision: "accept" } });
    } else if (state.status === "awaiting_clarification" && question && !handled.has(question.clarificationId)) {
      handled.add(question.clarificationId);
      interventions++;
      await decide.skip({ user, clarificationId: question.clarificationId });
    } else if (state.status === "paused") {
      // An outage, a timeout, an invalid plan: nobody is there to fix it in an eval.
      interventions++;
      await decide.cancel({ user, runId, reason: `eval: the run paused (${state.pauseReason?.reason ?? "unknown"})` });
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await cancelRun({ user, runId, reason: "eval: time limit" }).catch(() => null);
  await inngest.send(runCancelled.create({ runId }));
  return { status: "timeout", interventions };
}

async function runCheck(task: EvalTask, repoPath: string, branch: string, runId: string): Promise<{ solved: boolean; output: string }> {
  const sandbox = await createSandbox({ runId: `${runId}_check`, repoPath, ref: branch, kind: "local" });
  try {
    const r = await sandbox.exec("sh", ["-c", task.check], { timeoutMs: 120_000 });
    return { solved: r.exitCode === 0 && !r.timedOut, output: `${r.stdout}${r.stderr}`.trim().slice(-2000) };
  } finally {
    await sandbox.destroy();
  }
}

/**
 * Run the tasks one after another through the real workflow and return one result per task. Starts its own embedded
 * executor in this process, on the database GATEHOUSE_DATA_DIR / DATABASE_URL point at.
 */
export async function runEval({
  tasks,
  routing,
  timeoutMs = 10 * 60_000,
  onResult,
}: {
  tasks: EvalTask[];
  routing: Routing;
  timeoutMs?: number;
  onResult?: (result: EvalResult) => void;
}): Promise<EvalResult[]> {
  const executor = new Executor({
    apps: [ownAppTarget({ inProcess: true })],
    pollMs: 100,
    log: () => {},
  });
  await executor.start();
  const owner = await ensureLocalOwner();
  const user: SessionUser = { id: owner.id, name: owner.name, via: "admin-token" };
  const results: EvalResult[] = [];
  try {
    for (const task of tasks) {
      const started = performance.now();
      const repo = await makeRepo(task);
      const project = await createProject({ name: `eval ${task.id} ${path.basename(repo)}`, ownerId: owner.id, repository: { type: "local", path: repo } });
      const request = isDemo(routing) && task.demoRequest ? task.demoRequest : task.request;
      const run = await startRun({
        user,
        projectId: project.id,
        request,
        config: { ...task.config, trustMode: { planning: "auto", implementation: "auto", fixes: "auto" }, modelRouting: routing },
      });
      await inngest.send(runStarted.create({ runId: run.id }));
      const { status, interventions } = await driveToEnd(user, run.id, Date.now() + timeoutMs);
      const check = status === "completed" ? await runCheck(task, repo, run.branch!, run.id) : { solved: false, output: `not checked: the run ended ${status}` };
      const calls = await modelCallsForRun({ runId: run.id });
      const result: EvalResult = {
        task: task.id,
        status,
        solved: check.solved,
        checkOutput: check.output,
        interventions,
        costUsd: calls.reduce((s, c) => s + c.costUsd, 0),
        tokens: calls.reduce((s, c) => s + c.tokensIn + c.tokensOut, 0),
        modelCalls: calls.length,
        seconds: (performance.now() - started) / 1000,
      };
      results.push(result);
      onResult?.(result);
    }
  } finally {
    await executor.stop();
  }
  return results;
}

export function summarize(results: EvalResult[]) {
  const solved = results.filter((r) => r.solved).length;
  return {
    tasks: results.length,
    solved,
    passRate: results.length ? solved / results.length : 0,
    costUsd: results.reduce((s, r) => s + r.costUsd, 0),
    seconds: results.reduce((s, r) => s + r.seconds, 0),
    interventions: results.reduce((s, r) => s + r.interventions, 0),
  };
}
