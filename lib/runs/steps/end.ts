import { getRunState, listEvents } from "@/lib/db/event-store";
import { redact } from "@/lib/redact";
import { releaseSandbox } from "@/lib/sandbox";
import { git } from "@/lib/git";
import { TERMINAL_STATUSES } from "@/lib/workflow";
import { append, loadRun, RunEndedError, workflowClock } from "./context";
import { lastValidationReport, writeRecords } from "./records";
import { releaseTaskSandboxes, runSandbox } from "./workspace";
import { emitRunNotice } from "./notices";

/*
 * A run's end: watched for while a long step runs (a cancel stops the step within a poll), and the end of a run that
 * failed or was cancelled (no sandbox left, its records written).
 */

/** How often a running turn looks whether its run has ended (cancel must stop it within a second or two). */
export const END_POLL_MS = 250;

/**
 * One signal for a long step of a stage: it fires when the run ends (a cancel) or when the stage's deadline passes,
 * polled against workflowClock (the clock the workflow's own deadline checks use) every END_POLL_MS.
 */
export function stageSignal(runId: string, deadline?: number) {
  const cancelled = watchForEnd(runId);
  const overtime = new AbortController();
  const timer = deadline === undefined ? null : setInterval(() => workflowClock.now() > deadline && overtime.abort(new Error("stage deadline")), END_POLL_MS);
  return {
    signal: AbortSignal.any([cancelled.signal, overtime.signal]),
    cancelled: () => cancelled.signal.aborted,
    overtime: () => overtime.signal.aborted && !cancelled.signal.aborted,
    stop: () => {
      cancelled.stop();
      if (timer) clearInterval(timer);
    },
  };
}

/** An AbortSignal that fires when the run is found ended (cancelled, failed) while a long step runs. */
export function watchForEnd(runId: string) {
  const controller = new AbortController();
  let checking = false;
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    endedStatus(runId)
      .then((status) => {
        if (status) controller.abort(new RunEndedError(status));
      })
      .catch(() => null)
      .finally(() => {
        checking = false;
      });
  }, END_POLL_MS);
  return { signal: controller.signal, stop: () => clearInterval(timer) };
}

export async function endedStatus(runId: string): Promise<string | null> {
  const state = await getRunState({ id: runId });
  return state && TERMINAL_STATUSES.has(state.status) ? state.status : null;
}

/**
 * After a cancellation (the workflow function is stopped between or during steps): drop the sandbox and write the
 * run's records on its branch. A no-op for a run that is not cancelled.
 */
export async function cleanUpCancelled({ runId }: { runId: string }) {
  const state = await getRunState({ id: runId });
  if (state?.status !== "cancelled") return { userId: state?.userId ?? null, cleaned: false };
  const done = await finishUnsuccessfully({ runId, reason: null, stepKey: "cancelled" });
  return { userId: done.userId, cleaned: true };
}

/** The end of a run that failed or was cancelled: no sandbox left, the branch and a record of what happened kept. */
export async function finishUnsuccessfully({ runId, reason, stepKey }: { runId: string; reason: string | null; stepKey: string }) {
  const run = await loadRun({ runId }).catch(() => null);
  if (!run) return { userId: null };
  await releaseSandbox(runSandbox(run)).catch(() => null);
  const state = await getRunState({ id: runId });
  // A cancelled run's task branches go with it (a merged task's went at its merge); a failed run's stay to be read.
  await releaseTaskSandboxes(run, { deleteBranches: state?.status === "cancelled" }).catch(() => null);
  if (state && !TERMINAL_STATUSES.has(state.status) && reason !== null) {
    const explained = await explainFailure(runId, run.branch, reason);
    await append(runId, stepKey, [{ type: "RUN_FAILED", payload: { reason: redact(explained).slice(0, 2000), stage: state.currentStage } }]).catch(
      (error) => {
        if (!(error instanceof RunEndedError)) throw error;
      },
    );
  }
  if ((await getRunState({ id: runId }))?.status === "failed") await emitRunNotice({ runId, kind: "failed", key: stepKey });
  const branchExists = await git(run.repoPath, ["rev-parse", "--verify", "--quiet", `refs/heads/${run.branch}`], { allowFailure: true });
  if (branchExists.code === 0) await writeRecords(run, await lastValidationReport(runId));
  return { userId: run.userId };
}

/** Inngest's error for a function run past its steps per run (lib/executor's strict mode gives the same text). */
const STEP_LIMIT = /exceeded the step limit of (\d+) steps/;

/**
 * A failure reason as a person can act on it. Inngest ends a function run at 1,000 steps, and a run's steps grow with
 * its tasks and their turns: the reason then says so, how far the run got and what to do, after Inngest's own words.
 */
export async function explainFailure(runId: string, branch: string, reason: string): Promise<string> {
  const limit = STEP_LIMIT.exec(reason);
  if (!limit) return reason;
  const events = await listEvents({ runId, limit: 100_000 });
  const taskIds = (type: string) => new Set(events.flatMap((e) => (e.type === type ? [(e.payload as { taskId?: unknown }).taskId] : [])).filter((id) => typeof id === "string")).size;
  const completed = taskIds("TASK_COMPLETED");
  const started = taskIds("TASK_STARTED");
  const progress = started
    ? ` It completed ${completed} of the ${started} tasks it started; their work stays on the branch ${branch}.`
    : ` Its work so far stays on the branch ${branch}.`;
  return (
    `${reason} Inngest ends one function run at ${limit[1]} steps, and every model turn of every task is a step.${progress}` +
    " Split the request into smaller runs, or allow fewer turns per task (limits.maxIterations)."
  );
}
