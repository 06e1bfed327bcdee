import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { z } from "zod";
import { Executor } from "@/lib/executor";
import { checkInSandbox, inlineRepo, snapshotRepo } from "./checkout";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { getRunState } from "@/lib/db/event-store";
import { modelCallsForRun } from "@/lib/dashboard/costs";
import { startRun } from "@/lib/runs/service";
import { cancelRun } from "@/lib/runs/gates/decide-run";
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

export const evalTaskSchema = z
  .strictObject({
    id: z.string().regex(/^[a-z0-9-]+$/, "must be lower-case letters, digits and dashes"),
    description: z.string(),
    /** Where the task comes from: written by hand, mined from a repository's history, imported from SWE-bench. */
    source: z.enum(["file", "history", "swe-bench"]).default("file"),
    /** The toy repository: path → content (hand-written tasks). */
    files: z.record(z.string(), z.string()).optional(),
    /** Or a repository at a commit: the agent starts from a snapshot of that tree (no history, nothing withheld in it). */
    repo: z.strictObject({ path: z.string().min(1), commit: z.string().regex(/^[0-9a-f]{7,40}$/, "must be a commit sha") }).optional(),
    /** The commit that solved the task (history) — reported, never shown to the agent. */
    solution: z.string().optional(),
    /** Files written into the check's checkout only (withheld tests): path → content. Never in the agent's worktree. */
    hiddenFiles: z.record(z.string(), z.string()).optional(),
    /** What the models get. */
    request: z.string().min(1),
    /** What the demo model gets instead (with its instruction markers), when every stage runs on demo:*. */
    demoRequest: z.string().optional(),
    /** Extra run config (merged under the harness's trust mode and routing). */
    config: z.record(z.string(), z.unknown()).optional(),
    /** A shell command line run in the delivered branch's checkout (sandboxed, hidden files in place); exit 0 = solved. */
    check: z.string().min(1),
  })
  .refine((t) => !!t.files !== !!t.repo, { message: "give either files (an inline repository) or repo ({path, commit}), not both", path: ["files"] });
export type EvalTask = z.infer<typeof evalTaskSchema>;

export type Routing = { planner: string; implementer: string; validator: string };

export type EvalResult = {
  task: string;
  source: EvalTask["source"];
  /** The commit that solved the task (mined tasks), else the commit it starts from (imported ones), else null. */
  commit: string | null;
  /** The agent's repository (a fresh snapshot; the run's branch is there). */
  repoPath: string;
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

/** The agent's repository: the inline files, or a snapshot of the named commit's tree (no history, no hidden files). */
export function makeRepo(task: EvalTask): Promise<string> {
  if (task.repo) return snapshotRepo({ source: task.repo.path, commit: task.repo.commit, label: task.id });
  return inlineRepo({ files: task.files ?? {}, label: task.id });
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

async function runCheck(task: EvalTask, repoPath: string, branch: string): Promise<{ solved: boolean; output: string }> {
  const r = await checkInSandbox({ repoPath, ref: branch, command: task.check, hiddenFiles: task.hiddenFiles });
  return { solved: r.passed, output: r.output };
}

/**
 * Run the tasks one after another through the real workflow and return one result per task. Starts its own embedded
 * executor in this process, on the database GATEHOUSE_DATA_DIR / DATABASE_URL point at.
 */
export async function runEval({
  tasks,
  routing,
  timeoutMs = 10 * 60_000,
  concurrency = 1,
  onResult,
}: {
  tasks: EvalTask[];
  routing: Routing;
  timeoutMs?: number;
  /** Tasks run at once (each its own project and run); a task's time is then its wall time on a shared machine. */
  concurrency?: number;
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
  const runOne = async (task: EvalTask): Promise<EvalResult> => {
    const started = performance.now();
    const repo = await makeRepo(task);
    const project = await createProject({ name: `eval ${task.id} ${path.basename(repo)}`, ownerId: owner.id, repository: { type: "local", path: repo } });
    const request = isDemo(routing) && task.demoRequest ? task.demoRequest : task.request;
    const run = await startRun({
      user,
      projectId: project.id,
      request,
      config: { ...task.config, trustMode: { planning: "auto", implementation: "auto", fixes: "auto" }, modelRouting: { planner: routing.planner, implementer: routing.implementer, validator: routing.validator } },
    });
    await inngest.send(runStarted.create({ runId: run.id }));
    const { status, interventions } = await driveToEnd(user, run.id, Date.now() + timeoutMs);
    const check = status === "completed" ? await runCheck(task, repo, run.branch!) : { solved: false, output: `not checked: the run ended ${status}` };
    const calls = await modelCallsForRun({ runId: run.id });
    const result: EvalResult = {
      task: task.id,
      source: task.source,
      commit: task.solution ?? task.repo?.commit ?? null,
      repoPath: repo,
      status,
      solved: check.solved,
      checkOutput: check.output,
      interventions,
      costUsd: calls.reduce((s, c) => s + c.costUsd, 0),
      tokens: calls.reduce((s, c) => s + c.tokensIn + c.tokensOut, 0),
      modelCalls: calls.length,
      seconds: (performance.now() - started) / 1000,
    };
    return result;
  };
  const results: EvalResult[] = new Array(tasks.length);
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: Math.max(1, Math.min(concurrency, tasks.length)) }, async () => {
        while (next < tasks.length) {
          const i = next++;
          results[i] = await runOne(tasks[i]!);
          onResult?.(results[i]);
        }
      }),
    );
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
