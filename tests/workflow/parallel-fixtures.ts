import { expect } from "vitest";
import type { SessionUser } from "@/lib/auth/guard";
import { listEvents } from "@/lib/db/event-store";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { autoPlanning, expectRunConsistent, git, launch, newProject, tasksRequest, until, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

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

/**
 * A re-plan approved while another lane's task runs. Lanes [T1, T3] and [T2, T4] at limit 2, one re-plan allowed: T1's
 * session proposes a re-plan at once (the request's `[replan: …]`), T2's command waits for `go`. The re-plan's plan gate
 * is approved, T2 released once the approval is stored, and the run expected to complete. Returns the run, its
 * repository, its events, the approval's sequence and the tasks' branches (TASK_BRANCH_CREATED).
 */
export async function replanWhileLaneRuns(user: SessionUser, go: string) {
  const tasks = [
    "# Re-plan in lanes",
    "- [ ] T1: Write alpha",
    "  Files: alpha.txt",
    "- [ ] T2: Write beta",
    "  Files: beta.txt",
    `  [run: ${heldUntilRef(go, "beta.txt", 150)}]`,
    "- [ ] T3: Write gamma",
    "  Files: gamma.txt",
    "- [ ] T4: Write delta",
    "  Files: delta.txt",
    "",
  ].join("\n");
  const { project, repo } = await newProject(user);
  const request = tasksRequest("Re-plan lanes [replan: The repository keeps a changelog that the plan forgot.]", tasks);
  // One re-plan (the demo's T1 would propose again under a pasted tasks.md's unchanged tasks: refused, it goes on).
  const run = await launch(user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 2, maxReplans: 1 } });
  await waitForStatus(run.id, ["awaiting_approval", "completed", "failed"], 120_000);
  const gate = await waitForPendingGate(run.id);
  expect(gate.kind).toBe("plan");
  await approveGate({ user, runId: run.id, input: { gateId: gate.id } });
  await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
  await until(async () => (await eventsOf(run.id)).some((e) => e.type === "APPROVAL_GRANTED"), "the re-plan's approval", 120_000);
  git(repo, "update-ref", go, "HEAD");
  const events = await expectCompleted(run.id, 180_000);
  const approved = events.find((e) => e.type === "APPROVAL_GRANTED" && e.sequence > seqOf(events, "TASK_BRANCH_CREATED", "T2"))!.sequence;
  const branches = events
    .filter((e) => e.type === "TASK_BRANCH_CREATED")
    .map((e) => ({ ...(e.payload as { taskId: string; round: number; run: number }), sequence: e.sequence }));
  return { run, repo, events, approved, branches };
}
