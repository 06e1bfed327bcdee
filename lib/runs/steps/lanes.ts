import { releaseSandbox } from "@/lib/sandbox";
import { loadRun, workflowClock } from "./context";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { getDb } from "@/lib/db";
import { planChangedSince } from "./replan";
import { runSandbox } from "./workspace";

/*
 * Parallel tasks in lanes (inngest/run/tasks.ts): the steps between a lane's tasks. A task's work is committed on its
 * own branch when its session ends, which is all the round's merge reads, so its sandbox is free at once: the lane's
 * next task takes it over (beginTask), and the lane's last task's goes as the lane ends — a lane holds one sandbox, and
 * the merge at the round's end has none left to release.
 */

/**
 * A lane's task has ended: its sandbox (worktree, detached commands) goes — the lane's (`workspace`), else its own.
 * Quiet when it is gone already.
 */
export async function releaseTask({ runId, taskId, workspace = null }: { runId: string; taskId: string; workspace?: string | null }) {
  const run = await loadRun({ runId });
  await releaseSandbox(runSandbox(run, taskId, workspace)).catch(() => null);
  return { now: workflowClock.now() };
}

/**
 * Before a lane's next task: the lane takes the task unless the round is halting (`halt`: a failure, a budget stop or a
 * re-plan elsewhere in the round), a re-plan was approved while the lane's task ran, or a person asked for a pause (the
 * pause opens between rounds, and the task is left for the next one). A lane that takes it begins the task in the same
 * step (beginTask), which hands the lane's sandbox on to it (`previousWorkspace`); a lane that stops releases it here.
 */
export async function nextInLane({
  runId,
  previousTaskId,
  previousWorkspace = null,
  halt,
}: {
  runId: string;
  previousTaskId: string;
  previousWorkspace?: string | null;
  halt: string | null;
}) {
  // A re-plan approved while the lane's task ran ends the lane even before the workflow has taken the approval in
  // (the task that proposed it may still be on its way to its gate's answer): no task of the old plan is begun.
  const why =
    halt ?? ((await planChangedSince(await getDb(), runId, previousTaskId)) ? "replanned" : null) ?? ((await pendingPauseRequest({ runId })) ? "pause" : null);
  if (why !== null) await releaseTask({ runId, taskId: previousTaskId, workspace: previousWorkspace });
  return { take: why === null, why, now: workflowClock.now() };
}
