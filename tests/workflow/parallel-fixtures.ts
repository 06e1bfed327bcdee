import { expect } from "vitest";
import type { SessionUser } from "@/lib/auth/guard";
import { listEvents } from "@/lib/db/event-store";
import { expectRunConsistent, launch, tasksRequest, waitForStatus, waitForWorkflow } from "./harness";

/** What the parallel-task tests read of a stored run event. */
export type RunEvent = { type: string; payload: unknown; sequence: number };

/** The task an event is about, if any. */
export const taskOf = (e: RunEvent) => (e.payload as { taskId?: string }).taskId;

/** The sequence of the first event of `type` (about `taskId`, when given), or -1 if there is none. */
export const seqOf = (events: RunEvent[], type: string, taskId?: string) =>
  events.find((e) => e.type === type && (taskId === undefined || taskOf(e) === taskId))?.sequence ?? -1;

/** The run's events so far (the first thousand, more than any of these scenarios writes). */
export const eventsOf = async (runId: string) => (await listEvents({ runId, limit: 1000 })) as RunEvent[];

/**
 * A `[run: …]` command that waits until the test creates `ref` in the repository (at most `seconds`), then writes whether
 * it was released or gave up into `file`. `nap`: the seconds of each sleep between looks; a number no other command
 * uses lets the test see the command running.
 */
export const heldUntilRef = (ref: string, file: string, seconds = 30, nap = "0.1") =>
  `n=0; until git rev-parse -q --verify ${ref} >/dev/null || test $n -ge ${seconds * 10}; do sleep ${nap}; n=$((n+1)); done; if git rev-parse -q --verify ${ref} >/dev/null; then echo released; else echo gave-up; fi >> ${file}`;

/** A tasks.md of three independent tasks, each writing one file (one.txt, two.txt, three.txt). */
export const THREE_TASKS = ["# Three", "- [ ] T1: Write one", "  Files: one.txt", "- [ ] T2: Write two", "  Files: two.txt", "- [ ] T3: Write three", "  Files: three.txt", ""].join("\n");

/** Launch a run of the pasted `tasks` (planning auto, two tasks at once) and expect it to complete within 150 s. */
export async function completedInTwoLanes({ user, projectId, title, tasks }: { user: SessionUser; projectId: string; title: string; tasks: string }) {
  const run = await launch(user, projectId, tasksRequest(title, tasks), { trustMode: { planning: "auto" }, limits: { maxConcurrentTasks: 2 } });
  expect((await waitForStatus(run.id, ["completed", "failed"], 150_000)).status).toBe("completed");
  return run;
}

/** Expect the run to complete within `timeoutMs` (not fail, nor stop at a gate or a pause); then, its workflow ended, its events checked consistent. */
export async function expectCompleted(runId: string, timeoutMs: number) {
  expect((await waitForStatus(runId, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision", "paused"], timeoutMs)).status).toBe("completed");
  await waitForWorkflow(runId);
  return (await expectRunConsistent(runId)) as RunEvent[];
}
