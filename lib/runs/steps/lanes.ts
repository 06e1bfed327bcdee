import { releaseSandbox } from "@/lib/sandbox";
import { loadRun, workflowClock } from "./context";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { sandboxOptions } from "./workspace";

/*
 * Parallel tasks in lanes (inngest/run/tasks.ts): the steps between a lane's tasks. A task's work is committed on its
 * own branch when its session ends, which is all the round's merge reads, so its sandbox goes at once — a lane holds
 * one sandbox at a time, and the merge at the round's end has none left to release.
 */

/** A lane's task has ended: its sandbox (worktree, detached commands) goes. Quiet when it is gone already. */
export async function releaseTask({ runId, taskId }: { runId: string; taskId: string }) {
  const run = await loadRun({ runId });
  await releaseSandbox(await sandboxOptions(run, taskId)).catch(() => null);
  return { now: workflowClock.now() };
}

/**
 * Before a lane's next task: the lane takes the task unless the round is halting (`halt`: a failure, a budget stop or a
 * re-plan elsewhere in the round) or a person asked for a pause (the pause opens between rounds, and the task is left
 * for the next one). A lane that takes it begins the task in the same step (beginTask), which releases the previous
 * task's sandbox side by side with the task's start (its `previousTaskId`) rather than before it on the lane's critical
 * path; a lane that stops releases it here.
 */
export async function nextInLane({ runId, previousTaskId, halt }: { runId: string; previousTaskId: string; halt: string | null }) {
  const why = halt ?? ((await pendingPauseRequest({ runId })) ? "pause" : null);
  if (why !== null) await releaseTask({ runId, taskId: previousTaskId });
  return { take: why === null, why, now: workflowClock.now() };
}
