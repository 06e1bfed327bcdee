import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Executor, type ExecutorOptions } from "@/lib/executor";
import { ownAppTarget } from "@/inngest/embedded";
import { query } from "@/lib/executor/store";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { getRunState, listEvents, replay } from "@/lib/db/event-store";
import { startRun } from "@/lib/runs/service";
import type { SessionUser } from "@/lib/auth/guard";
import { inngest } from "@/inngest";
import { runStarted } from "@/inngest/events";
import type { RunStatus } from "@/lib/workflow";
import { afterAll, beforeAll, expect } from "vitest";

/** The real workflow on the embedded executor, driving Gatehouse's own serve handler in-process (signed). */
export async function startWorkflowHarness(options: Pick<ExecutorOptions, "waitLookBack" | "limits"> = {}) {
  const executor = new Executor({
    ...options,
    // Gatehouse's own app in signed mode, in-process: every call signed and verified as on Inngest Cloud.
    apps: [ownAppTarget({ inProcess: true })],
    pollMs: 50,
    leaseMs: 5_000,
    backoff: () => 50,
    log: () => {},
  });
  await executor.start();
  const owner = await ensureLocalOwner();
  const user: SessionUser = { id: owner.id, name: owner.name, via: "admin-token" };
  return { executor, user, close: () => executor.stop() };
}

type WorkflowHarness = Awaited<ReturnType<typeof startWorkflowHarness>>;

/** One harness for a test file: started before its tests and closed after them (its fields are set once beforeAll has run). */
export function useWorkflowHarness(): WorkflowHarness {
  const h = {} as WorkflowHarness;
  beforeAll(async () => {
    Object.assign(h, await startWorkflowHarness());
  });
  afterAll(async () => {
    await h.close();
  });
  return h;
}

export function git(repo: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.com", ...args], { cwd: repo, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

export function makeRepo(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-wf-repo-"));
  git(dir, "init", "-q", "-b", "main");
  fs.writeFileSync(path.join(dir, "README.md"), "# fixture\n");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "init");
  return dir;
}

export async function newProject(user: SessionUser, repo = makeRepo()) {
  const project = await createProject({ name: "wf", ownerId: user.id, repository: { type: "local", path: repo } });
  return { project, repo };
}

/** Start a run as POST /api/runs does: store it, then announce it. */
export async function launch(user: SessionUser, projectId: string, request: string, config: Record<string, unknown> = {}) {
  const run = await startRun({ user, projectId, request, config });
  await inngest.send(runStarted.create({ runId: run.id }));
  return run;
}

/** The trust mode of most scenarios: the plan is approved by itself, a fix still waits for a person. */
export const autoPlanning = { trustMode: { planning: "auto", fixes: "manual" } };

/** A request whose plan is the pasted `tasks` (a tasks.md), followed by `more` lines. */
export const tasksRequest = (title: string, tasks: string, ...more: string[]) => [title, "", "```tasks.md", tasks, "```", ...more].join("\n");

/** A run's route handler (POST /api/runs/[id]/…), as Next calls it. */
type RunRoute = (request: Request, context: { params: Promise<{ id: string }> }) => Promise<Response>;

/** POST to a run's route (pause, resume, …) as the admin, with an optional JSON body: its status and parsed body. */
export async function postRunRoute(route: RunRoute, runId: string, body?: unknown) {
  const response = await route(
    new Request(`http://127.0.0.1:3000/api/runs/${runId}/x`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    { params: Promise.resolve({ id: runId }) },
  );
  return { status: response.status, body: (await response.json()) as { run?: { status: string }; error?: { message: string } } };
}

export async function waitForStatus(runId: string, statuses: RunStatus[], timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const run = await getRunState({ id: runId });
    if (run && statuses.includes(run.status)) return run;
    if (Date.now() > until) {
      const events = await listEvents({ runId });
      throw new Error(`run ${runId} is ${run?.status}, not ${statuses.join("|")}; events: ${events.map((e) => e.type).join(", ")}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every scenario ends with: replay equals the projection, and the sequence has no gaps. */
export async function expectConsistent(runId: string) {
  const events = await listEvents({ runId, limit: 100_000 });
  const sequences = events.map((e) => e.sequence);
  const stored = await getRunState({ id: runId });
  const replayed = await replay({ runId });
  return { gapless: sequences.every((s, i) => s === i + 1), replayed, stored, replayEqual: JSON.stringify(replayed) === JSON.stringify(stored), events };
}

/** Wait until the run's workflow function has finished (the run's status flips a moment before its last records commit). */
export async function waitForWorkflow(runId: string, timeoutMs = 30_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const rows = await query<{ status: string }>(
      "SELECT status FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?",
      [runId],
    );
    const status = rows[0]?.status;
    if (status && ["completed", "failed", "cancelled"].includes(status)) return status;
    if (Date.now() > until) throw new Error(`workflow of ${runId} is still ${status ?? "not started"}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The end of every scenario: replay deep-equals the stored projection, sequences are gapless, and every step key's
 * events are one contiguous block (a step that ran twice wrote nothing twice).
 */
export async function expectRunConsistent(runId: string) {
  const { gapless, replayed, stored, events } = await expectConsistent(runId);
  expect(gapless).toBe(true);
  expect(replayed).toEqual(stored);
  const blocks: string[] = [];
  for (const e of events) {
    const key = (e.payload as { stepKey?: string }).stepKey;
    if (key && blocks.at(-1) !== key) blocks.push(key);
  }
  expect(blocks.length).toBe(new Set(blocks).size);
  return events;
}

/** The run's pending gate, polled until it appears. */
export async function waitForPendingGate(runId: string, timeoutMs = 60_000) {
  const { getDb } = await import("@/lib/db");
  const { gates } = await import("@/lib/db/schema");
  const { and, eq } = await import("drizzle-orm");
  const db = await getDb();
  const until = Date.now() + timeoutMs;
  for (;;) {
    const [gate] = await db.select().from(gates).where(and(eq(gates.workflowRunId, runId), eq(gates.status, "pending")));
    if (gate) return gate;
    if (Date.now() > until) throw new Error(`no pending gate on ${runId}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Poll until `check` returns a truthy value. */
export async function until<T>(check: () => Promise<T | null | undefined | false>, what: string, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const fileBlock = (p: string, content: string) => ["```file:" + p, content, "```"].join("\n");

/** Processes whose command line is exactly `args` (read from /proc, so also inside the sandbox's namespaces). */
export function processesRunning(args: string[]): number[] {
  const wanted = `${args.join("\0")}\0`;
  const pids: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, "utf8") === wanted) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}
