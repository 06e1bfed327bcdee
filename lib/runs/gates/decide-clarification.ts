import { and, eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { appendEventsTx } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { getVisibleRun } from "../service";
import { mayDecideEscalated } from "../deadlines";
import { checkAnswer, redactAnswer, type Answer } from "./answer";

/* A person closes an open question: answers it, or skips it ("proceed with your best judgement"). */

/** An approver of the project, or the backup approver the question's deadline escalated it to (config.deadlines). */
async function requireClarificationDecider({ user, runId, projectId, clarificationId }: { user: SessionUser; runId: string; projectId: string; clarificationId: string }) {
  await requireProjectRole({ user, projectId, action: "decide", notFound: "not_found:clarification" }).catch(async (error) => {
    if (!(error instanceof AppError && error.type === "forbidden")) throw error;
    if (!(await mayDecideEscalated({ runId, projectId, subject: { type: "clarification", id: clarificationId }, userId: user.id }))) throw error;
  });
}

/**
 * Close a pending question, answered or skipped: the caller may decide on it, an answer fits the question, and the row
 * and the run's event are written in one transaction guarded by `status = 'pending'` (of concurrent closings exactly
 * one applies, the rest get 409).
 */
async function closeClarification({
  user,
  clarificationId,
  closing,
}: {
  user: SessionUser;
  clarificationId: string;
  closing: { status: "answered"; response: Answer } | { status: "ignored"; then?: "planning" };
}) {
  const db = await getDb();
  const clarification = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, clarificationId) });
  if (!clarification) throw new AppError("not_found:clarification");
  const run = await getVisibleRun({ user, runId: clarification.workflowRunId }).catch((error) => {
    // Not a member: the question does not exist for them.
    if (error instanceof AppError && error.type === "not_found") throw new AppError("not_found:clarification");
    throw error;
  });
  await requireClarificationDecider({ user, runId: run.id, projectId: run.projectId, clarificationId });
  // An answer is checked as given (a chosen option must match), stored redacted.
  if (closing.status === "answered") checkAnswer(clarification, closing.response);
  if (closing.status === "ignored" && closing.then === "planning" && clarification.stage === "planning") {
    throw new AppError(
      "bad_request:api",
      "This question was asked while planning: the planner is the one asking. Skip it to let it plan with its best judgement, or answer it.",
    );
  }
  const response = closing.status === "answered" ? redactAnswer(closing.response) : null;
  return write(async (tx) => {
    const updated = await tx
      .update(clarificationRequests)
      .set({ status: closing.status, response, answeredBy: user.id, answeredAt: new Date() })
      .where(and(eq(clarificationRequests.id, clarificationId), eq(clarificationRequests.status, "pending")))
      .returning();
    if (updated.length !== 1) {
      // Read as pending, closed since by someone else.
      throw new AppError("conflict:clarification", `This question is not open: it is ${clarification.status === "pending" ? "answered" : clarification.status}.`);
    }
    const payload = { clarificationId, by: user.id };
    await appendEventsTx(tx, clarification.workflowRunId, [
      closing.status === "answered"
        ? { type: "CLARIFICATION_ANSWERED", payload }
        : { type: "CLARIFICATION_IGNORED", payload: closing.then === "planning" ? { ...payload, then: "planning" as const } : payload },
    ]);
    return updated[0]!;
  });
}

export async function answerClarification({ user, clarificationId, response }: { user: SessionUser; clarificationId: string; response: Answer }) {
  return closeClarification({ user, clarificationId, closing: { status: "answered", response } });
}

/**
 * Skip a question (CLARIFICATION_IGNORED): the asking stage proceeds with its best judgement and notes the assumption;
 * or, with `then: "planning"`, the run goes back to planning with the question (the planner re-plans with it, and the
 * new plan passes the plan gate). A planning question cannot be sent back to planning (400). Same guards as an
 * answer; a question already answered or skipped is a 409.
 */
export async function skipClarification({ user, clarificationId, then }: { user: SessionUser; clarificationId: string; then?: "planning" }) {
  return closeClarification({ user, clarificationId, closing: { status: "ignored", ...(then ? { then } : {}) } });
}
