import { getRunState, listEventsOfTypes } from "@/lib/db/event-store";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";
import { mayOpenWait, refuseUnlessMayOpenWait, TERMINAL_STATUSES, type PlanDocument, type Stage } from "@/lib/workflow";
import { acknowledgeDecision, decisionKey, waitCheckHooks } from "../gates/acks";
import { append, loadRun, workflowClock, type WaitResult } from "./context";
import { parkSandbox } from "./workspace";
import { emitRunNotice } from "./notices";

/* Pauses: a run paused (an outage, a timeout, an invalid plan, a person's request) until a person resumes it. */

export async function pause({
  runId,
  stepKey,
  reason,
  message,
  stage,
  plan: draft,
  taskId,
}: {
  runId: string;
  stepKey: string;
  /** Paused by this parallel task: refused (nothing written) if the run waits for a person or another task's re-plan. */
  taskId?: string | null;
  /** invalid_plan: the plan with its invalid diagram, shown in the editor so a person can fix it by hand. */
  plan?: PlanDocument | null;
  reason: "model_outage" | "model_auth" | "timeout" | "invalid_plan" | "merge_conflict" | "sandbox" | "secret_detected" | "by_person" | "storage" | "database" | "other";
  message: string;
  stage: Stage | null;
}): Promise<{ tree: string | null }> {
  const run = await loadRun({ runId });
  // A full or read-only disk cannot take the workspace's snapshot: it stays where it is until the run resumes.
  const tree = reason === "storage" ? null : await parkSandbox(run, `paused: ${reason}`, stepKey);
  await append(runId, stepKey, [{ type: "RUN_PAUSED", payload: { reason, message: redact(message), stage, ...(draft ? { plan: draft } : {}) } }], {
    ...(taskId ? { guard: (state) => refuseUnlessMayOpenWait(state, taskId, "RUN_PAUSED") } : {}),
  });
  await emitRunNotice({ runId, kind: "paused", key: stepKey });
  return { tree };
}

/**
 * A pause a person asked for that no implementation turn has honoured yet (it came during validation, or during the
 * implementation's last turn): the workflow honours it at the next stage boundary, with the message to show.
 */
export async function pauseRequested({ runId }: { runId: string }): Promise<{ message: string } | null> {
  const request = await pendingPauseRequest({ runId });
  if (!request) return null;
  return { message: `Paused by a person${request.note ? `: ${redact(request.note)}` : ""}. Resume it to continue where it stopped.` };
}

export async function readResume({
  runId,
  acknowledge = true,
}: {
  runId: string;
  /**
   * Whether this read takes the resume's announcement off the re-announcer (decisionKey.resume). False for a parallel
   * task that joined another task's pause (pauseUntilResumed): the task that opened the pause waits for that
   * announcement, and a joiner's acknowledgement would stop its repeats before the opener's wait took one.
   */
  acknowledge?: boolean;
}): Promise<WaitResult<{ action: "retry" | "extend"; editedPlan: PlanDocument | null; by: string | null; now: number }>> {
  const run = await getRunState({ id: runId });
  if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  if (TERMINAL_STATUSES.has(run.status)) return { state: "ended", status: run.status };
  if (run.status === "paused") {
    await waitCheckHooks.afterPending?.({ runId, key: "resume" });
    return { state: "pending" };
  }
  // By type, not among the last N events: a parallel run's other tasks may have written many since the resume.
  const resumed = (await listEventsOfTypes({ runId, types: ["RUN_RESUMED"] })).at(-1);
  if (resumed && acknowledge) await acknowledgeDecision({ runId, key: decisionKey.resume(resumed.sequence) });
  const action = resumed?.type === "RUN_RESUMED" ? (resumed.payload.action ?? "retry") : "retry";
  const editedPlan = resumed?.type === "RUN_RESUMED" ? (resumed.payload.editedPlan ?? null) : null;
  const by = resumed?.type === "RUN_RESUMED" ? resumed.payload.by : null;
  return { state: "done", action, editedPlan, by, now: workflowClock.now() };
}

/**
 * Whether the run waits for no person right now (running, no gate, no question): a parallel task opens its own wait
 * only then, since a run has one such wait at a time. A re-plan under way holds that one wait from its proposal to its
 * gate's decision: only its own task (`taskId`) opens waits meanwhile (its plan gate, a budget gate).
 */
export async function waitsForNoOne({ runId, taskId }: { runId: string; taskId?: string | null }): Promise<boolean> {
  const state = await getRunState({ id: runId });
  if (state && TERMINAL_STATUSES.has(state.status)) return true; // the open step then says the run ended
  return !!state && mayOpenWait(state, taskId ?? null);
}

/**
 * Whether a parallel task over the stage's time (its deadline `due`, on the workflow clock) is covered by a timeout
 * pause a person resumed at or after `due`: that extend was given while this task was over too, so the task goes on
 * without a pause of its own. The stage's timeout covers all its tasks: one overrun, one pause, one extend. While such
 * a pause is open the task's own open is busy (it tries again once that wait ends), and so meets the extend here; it
 * does not wait for the resume itself (two waits of one run for one announcement would take it once). A resume is
 * compared by the workflow-clock time it records (`at`); one without it (written before it was recorded) covers nothing.
 */
export async function pausedForTimeout({ runId, due }: { runId: string; due: number }): Promise<boolean> {
  const state = await getRunState({ id: runId });
  if (!state || state.status === "paused") return false;
  let timeoutPause = false;
  for (const e of await listEventsOfTypes({ runId, types: ["RUN_PAUSED", "RUN_RESUMED"] })) {
    if (e.type === "RUN_PAUSED") timeoutPause = e.payload.reason === "timeout";
    else if (e.type === "RUN_RESUMED" && timeoutPause && (e.payload.at ?? -Infinity) >= due) return true;
  }
  return false;
}

/**
 * Whether a parallel task's step that met a full or read-only disk (the step began at `failedAt`) is covered by a pause
 * for the disk: the run is paused for it now (the task joins that pause rather than opening one of its own after it),
 * or a person resumed such a pause since (that resume answers this failure too: the task retries at once, and a disk
 * still full pauses the run again). The run pauses once for the disk, and when a person resumes it every task retries
 * its own step.
 */
export async function pausedForStorage({ runId, failedAt }: { runId: string; failedAt?: number }): Promise<boolean> {
  const state = await getRunState({ id: runId });
  if (!state) return false;
  if (state.status === "paused") return state.pauseReason?.reason === "storage";
  if (failedAt === undefined) return false;
  let storagePause = false;
  for (const e of await listEventsOfTypes({ runId, types: ["RUN_PAUSED", "RUN_RESUMED"] })) {
    if (e.type === "RUN_PAUSED") storagePause = e.payload.reason === "storage";
    else if (e.type === "RUN_RESUMED" && storagePause && +e.timestamp >= failedAt) return true;
  }
  return false;
}

const STORAGE_ERRORS: Array<[RegExp, string]> = [
  [/ENOSPC|No space left on device/i, "the disk is full"],
  [/EDQUOT|Disk quota exceeded/i, "the disk quota is used up"],
  [/EROFS|Read-only file system/i, "the file system is read-only"],
];

/**
 * A step that failed because the disk where it writes (the data directory, a workspace, the repository) is full or
 * read-only: what a person should know to fix it, or null for any other error. Such a failure pauses the run (reason
 * `storage`) instead of failing it: nothing a retry does helps until a person frees space.
 */
export function storageFailure(error: unknown): string | null {
  const text = error instanceof Error ? `${(error as NodeJS.ErrnoException).code ?? ""} ${error.message}` : String(error);
  const found = STORAGE_ERRORS.find(([pattern]) => pattern.test(text));
  if (!found) return null;
  const detail = redact(error instanceof Error ? error.message : String(error)).slice(0, 300);
  return `Paused: ${found[1]} where Gatehouse writes (${detail}). Free space or make it writable, then resume the run: it retries the step that failed, and nothing done before it is lost.`;
}
