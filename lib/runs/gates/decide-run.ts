import { and, desc, eq } from "drizzle-orm";
import { z } from "zod";
import { write } from "@/lib/db";
import { clarificationRequests, gates, workflowEvents } from "@/lib/db/schema";
import { appendEventsTx, eventTypeIn } from "@/lib/db/event-store";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { AppError } from "@/lib/errors";
import type { SessionUser } from "@/lib/auth/guard";
import { redact } from "@/lib/redact";
import { TERMINAL_STATUSES, type PlanDocument } from "@/lib/workflow";
import { getVisibleRun } from "../service";
import { applyPlanEdits } from "../plan-edits";
import { redacted } from "./decide";
import { checkEditedPlan, editedPlanSchema } from "./edited-plan";
import { workflowClock } from "../steps/context";

/* A person's decision about the whole run, not at a gate: cancel, pause, resume (retry or extend), merge. */

export const cancelSchema = z.strictObject({ reason: z.string().max(2_000).optional() }).transform(redacted);
export const resumeSchema = z
  .strictObject({
    minutes: z.number().int().min(1).max(60 * 24 * 7).optional(),
    notes: z.string().max(2_000).optional(),
    /** Only for a run paused with an invalid plan: the plan fixed by hand, which the run then uses. */
    editedPlan: editedPlanSchema.optional(),
  })
  .transform(redacted);

/** Cancel a run in any non-final state; pending gates and questions are closed with it. */
export async function cancelRun({ user, runId, reason }: { user: SessionUser; runId: string; reason?: string }) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (TERMINAL_STATUSES.has(run.status)) {
    throw new AppError("conflict:run", `The run is already ${run.status}; there is nothing to cancel.`);
  }
  return write(async (tx) => {
    const { state } = await appendEventsTx(tx, runId, [{ type: "RUN_CANCELLED", payload: { by: user.id, reason } }]);
    await tx
      .update(gates)
      .set({ status: "cancelled", decidedAt: new Date(), decidedBy: user.id })
      .where(and(eq(gates.workflowRunId, runId), eq(gates.status, "pending")));
    await tx
      .update(clarificationRequests)
      .set({ status: "cancelled" })
      .where(and(eq(clarificationRequests.workflowRunId, runId), eq(clarificationRequests.status, "pending")));
    return state;
  });
}

export const mergeSchema = z.strictObject({ notes: z.string().trim().max(2000, "notes: at most 2000 characters").optional() });

/**
 * A person's decision to merge a completed run that was delivered without a merge: accepted after failed validation
 * (never merged automatically), or finished with autoMerge off. Recorded as MERGE_DECIDED; the run-merge function then
 * squash-merges (local) or merges the pull request (GitHub) and records PR_MERGED or MERGE_FAILED. 409 for a run that
 * is not completed, already merged, or has a merge decision under way. Checked and written in one transaction, so two
 * people clicking at once make one decision.
 */
export async function decideMerge({ user, runId, notes }: { user: SessionUser; runId: string; notes?: string }) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (run.status !== "completed") {
    throw new AppError("conflict:run", `The run is ${run.status.replaceAll("_", " ")}; only a completed run can be merged.`);
  }
  return write(async (tx) => {
    const [last] = await tx
      .select({ type: workflowEvents.type })
      .from(workflowEvents)
      .where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(["MERGE_DECIDED", "MERGE_FAILED", "PR_MERGED"])))
      .orderBy(desc(workflowEvents.sequence))
      .limit(1);
    if (last?.type === "PR_MERGED") throw new AppError("conflict:run", "The run is already merged.");
    if (last?.type === "MERGE_DECIDED") throw new AppError("conflict:run", "A merge of this run is already under way.");
    const { state } = await appendEventsTx(tx, runId, [{ type: "MERGE_DECIDED", payload: { by: user.id, notes: notes ? redact(notes) : null } }]);
    return state;
  });
}

export const pauseSchema = z.strictObject({ note: z.string().trim().max(2000, "note: at most 2000 characters").optional() });

/**
 * Ask a computing run to pause (PAUSE_REQUESTED): it parks at its next turn boundary — work in progress committed to
 * the branch, sandbox freed, no slot held — and waits for POST /resume. 409 unless the run is computing, or when a
 * pause is already requested.
 */
export async function requestPause({ user, runId, note }: { user: SessionUser; runId: string; note?: string }) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (run.status !== "running") {
    throw new AppError("conflict:run", `The run is ${run.status.replaceAll("_", " ")}; only a running run can be paused.`);
  }
  // Planning, implementation and validation pause at their next step boundary (an implementation turn, or the start of
  // the next stage). Delivery is the run's last step, with no boundary left to stop at.
  if (run.currentStage === "delivery") {
    throw new AppError("conflict:run", "The run is delivering its work (its last step) and cannot pause now; let it finish, or cancel it.");
  }
  if (await pendingPauseRequest({ runId })) throw new AppError("conflict:run", "A pause is already requested; the run pauses at its next step.");
  const { state } = await write((tx) =>
    appendEventsTx(tx, runId, [{ type: "PAUSE_REQUESTED", payload: { by: user.id, note: note ? redact(note) : null } }]),
  );
  return state;
}

/**
 * Resume a paused run: `retry` after a model outage or failure, `extend` after a stage timeout. A run paused for an
 * invalid plan may instead be resumed with the plan fixed by hand (`editedPlan`, checked with Mermaid's grammar): the
 * planner's draft with these edits becomes the run's next plan version.
 */
export async function resumeRun({
  user,
  runId,
  action,
  editedPlan,
}: {
  user: SessionUser;
  runId: string;
  action: "retry" | "extend";
  editedPlan?: z.output<typeof editedPlanSchema>;
}) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (run.status !== "paused") {
    throw new AppError("conflict:run", `The run is ${run.status.replaceAll("_", " ")}, not paused; there is nothing to ${action}.`);
  }
  if (action === "extend" && run.pauseReason?.reason !== "timeout") {
    throw new AppError("conflict:run", `The run is paused for ${run.pauseReason?.reason ?? "another reason"}, not a timeout; use retry.`);
  }
  let fixed: PlanDocument | null = null;
  if (editedPlan) {
    if (run.pauseReason?.reason !== "invalid_plan") {
      throw new AppError(
        "conflict:run",
        `editedPlan: the run is paused for ${run.pauseReason?.reason?.replaceAll("_", " ") ?? "another reason"}, not an invalid plan; resume it without a plan.`,
      );
    }
    await checkEditedPlan(editedPlan);
    const draft: PlanDocument = run.pauseReason.plan ?? { summary: "", mermaid: "", tasks: [], acceptanceCriteria: [] };
    fixed = applyPlanEdits({ drafted: draft, edited: editedPlan });
    if (fixed.tasks.length === 0) {
      throw new AppError("bad_request:api", "editedPlan.tasks: the planner's draft has no tasks to keep; give at least one task.");
    }
  }
  const { state } = await write((tx) =>
    appendEventsTx(tx, runId, [{ type: "RUN_RESUMED", payload: { by: user.id, action, at: workflowClock.now(), ...(fixed ? { editedPlan: fixed } : {}) } }]),
  );
  return state;
}
