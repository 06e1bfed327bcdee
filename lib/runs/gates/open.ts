import { asc, eq, sql } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { clarificationRequests, gates, workflowRuns } from "@/lib/db/schema";
import { appendEventsTx, findStepEvents, getRunState, listEvents, rowToState } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { redact, redactDeep } from "@/lib/redact";
import type { ClarificationResponseType } from "@/lib/agents";
import { refuseUnlessMayOpenWait, TERMINAL_STATUSES, type DecisionDeadlineInfo, type GateKind, type RunState, type Stage } from "@/lib/workflow";
import { acknowledgeDecision, decisionKey, waitCheckHooks } from "./acks";
import { deadlineFor } from "../deadlines";
import type { EditedPlan } from "../plan-edits";
import { loadRun, RunEndedError, workflowClock, type WaitResult } from "../steps/context";
import { parkSandbox } from "../steps/workspace";
import { emitRunNotice } from "../steps/notices";

/*
 * Gates and questions as the run opens and reads them (steps of the run workflow): a gate opened with its context, a
 * question asked (escalated to a gate past maxClarifications), and their stored decisions read by the waiting run —
 * pending, ended with the run, or decided (and then acknowledged, lib/runs/decision-acks.ts).
 */

export async function openGate({
  runId,
  stepKey,
  kind,
  context,
  taskId,
}: {
  runId: string;
  stepKey: string;
  kind: GateKind;
  context: Record<string, unknown>;
  /** Opened by this parallel task while the run's other tasks compute on: the run keeps its slot meanwhile. */
  taskId?: string | null;
}): Promise<{ gateId: string; tree: string | null; deadline: DecisionDeadlineInfo | null }> {
  const run = await loadRun({ runId });
  const tree = await parkSandbox(run, `waiting for a ${kind} decision`, stepKey);
  const { gateId, deadline } = await write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
    const earlier = (await findStepEvents(tx, runId, stepKey)).find((e) => e.type === "APPROVAL_REQUESTED");
    if (earlier?.type === "APPROVAL_REQUESTED") return { gateId: earlier.payload.gateId, deadline: earlier.payload.deadline ?? null };
    // A parallel task's gate: refused if another task's wait or re-plan was written since the task looked.
    if (taskId && current) refuseUnlessMayOpenWait(rowToState(current), taskId, "APPROVAL_REQUESTED");
    const [max] = await tx.select({ n: sql<number>`coalesce(max(${gates.gateNumber}), 0)` }).from(gates).where(eq(gates.workflowRunId, runId));
    const gateNumber = (max?.n ?? 0) + 1;
    const id = newId("gate");
    const planVersion = kind === "plan" ? (context.version as number | undefined) : undefined;
    const deadline = deadlineFor({ config: run.config, subject: kind, now: workflowClock.now() });
    await tx.insert(gates).values({
      id,
      workflowRunId: runId,
      gateNumber,
      kind,
      artifactVersion: planVersion ?? null,
      context: redactDeep(context),
    });
    await appendEventsTx(
      tx,
      runId,
      [{ type: "APPROVAL_REQUESTED", payload: { gateId: id, gateNumber, kind, artifactVersion: planVersion ?? null, ...(deadline ? { deadline } : {}), ...(taskId ? { taskId } : {}) } }],
      { stepKey },
    );
    return { gateId: id, deadline };
  });
  // A spent budget stops the run until a person decides: told as a pause too (to channels that take everything).
  if (kind === "budget") await emitRunNotice({ runId, kind: "paused", key: stepKey, gateId });
  return { gateId, tree, deadline };
}

/**
 * A gate as a waiting workflow reads it: still pending (the run's wait goes on), ended with the run, or decided — and
 * then acknowledged, so the re-announcer stops repeating the decision's announcement (lib/runs/decision-acks.ts).
 */
export async function readDecidedGate({
  runId,
  gateId,
  ackKey = decisionKey.gate(gateId),
}: {
  runId: string;
  gateId: string;
  /** The key this reader acknowledges the decision under (a parallel task that joined a re-plan's gate has its own). */
  ackKey?: string;
}): Promise<{ state: "pending" } | { state: "ended"; status: string } | { state: "decided"; gate: typeof gates.$inferSelect }> {
  const db = await getDb();
  const gate = await db.query.gates.findFirst({ where: eq(gates.id, gateId) });
  if (!gate) throw new AppError("not_found:gate", `Gate ${gateId} does not exist.`);
  if (gate.status === "pending") {
    const run = await getRunState({ id: runId });
    if (run && TERMINAL_STATUSES.has(run.status)) return { state: "ended", status: run.status };
    await waitCheckHooks.afterPending?.({ runId, key: decisionKey.gate(gateId) });
    return { state: "pending" };
  }
  if (gate.status === "cancelled") return { state: "ended", status: "cancelled" };
  await acknowledgeDecision({ runId, key: ackKey });
  return { state: "decided", gate };
}

export async function readGate({
  runId,
  gateId,
  ackKey,
}: {
  runId: string;
  gateId: string;
  ackKey?: string;
}): Promise<WaitResult<{ gateId: string; decision: string; notes: string | null; decidedBy: string | null; editedPlan: EditedPlan | null; /** An escalated question's typed answer, as text. */ answer: string | null; now: number }>> {
  const read = await readDecidedGate({ runId, gateId, ...(ackKey ? { ackKey } : {}) });
  if (read.state !== "decided") return read;
  const { gate } = read;
  const payload = gate.payload as { editedPlan?: EditedPlan; response?: unknown } | null;
  return {
    state: "done",
    gateId: gate.id,
    decision: gate.decision ?? gate.status,
    notes: gate.notes,
    decidedBy: gate.decidedBy,
    editedPlan: payload?.editedPlan ?? null,
    answer: payload?.response !== undefined && payload?.response !== null ? answerText(payload.response) : null,
    now: workflowClock.now(),
  };
}

/**
 * Ask a person. Up to maxClarifications questions are clarifications; the next escalates to a full approval gate where
 * a person sees the whole context.
 */
export async function ask({
  runId,
  stepKey,
  stage,
  question,
  context,
  options,
  responseType,
  taskId,
}: {
  runId: string;
  stepKey: string;
  stage: Stage;
  question: string;
  context: string | null;
  options: string[];
  responseType: ClarificationResponseType;
  /** Asked by this parallel task while the run's other tasks compute on: the run keeps its slot meanwhile. */
  taskId?: string | null;
}): Promise<
  | { kind: "clarification"; clarificationId: string; tree: string | null; deadline: DecisionDeadlineInfo | null }
  | { kind: "escalation"; gateId: string; tree: string | null; deadline: DecisionDeadlineInfo | null }
> {
  const run = await loadRun({ runId });
  const state = await getRunState({ id: runId });
  if ((state?.clarificationCount ?? 0) >= run.config.maxClarifications) {
    const db = await getDb();
    const earlier = await db
      .select()
      .from(clarificationRequests)
      .where(eq(clarificationRequests.workflowRunId, runId))
      .orderBy(asc(clarificationRequests.createdAt));
    const gate = await openGate({
      runId,
      stepKey,
      taskId,
      kind: "escalation",
      context: {
        question,
        context,
        options,
        // As a clarification stores it: options make a text question a single choice (the gate asks in that form).
        responseType: options.length && responseType === "text" ? "single_choice" : responseType,
        stage,
        reason: `The run already asked ${run.config.maxClarifications} question(s), its limit.`,
        clarifications: earlier.map((c) => ({ question: c.question, response: c.response, status: c.status })),
      },
    });
    return { kind: "escalation", gateId: gate.gateId, tree: gate.tree, deadline: gate.deadline };
  }
  const tree = await parkSandbox(run, "waiting for an answer", stepKey);
  const { clarificationId, deadline } = await write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
    const earlier = (await findStepEvents(tx, runId, stepKey)).find((e) => e.type === "CLARIFICATION_REQUESTED");
    if (earlier?.type === "CLARIFICATION_REQUESTED") return { clarificationId: earlier.payload.clarificationId, deadline: earlier.payload.deadline ?? null };
    // A parallel task's question: refused if another task's wait or re-plan was written since the task looked.
    if (taskId && current) refuseUnlessMayOpenWait(rowToState(current), taskId, "CLARIFICATION_REQUESTED");
    const id = newId("clr");
    const deadline = deadlineFor({ config: run.config, subject: "clarification", now: workflowClock.now() });
    await tx.insert(clarificationRequests).values({
      id,
      workflowRunId: runId,
      stage,
      question: redact(question),
      context: context ? redact(context) : null,
      options: options.length ? options : null,
      responseType: options.length && responseType === "text" ? "single_choice" : responseType,
      attemptNumber: (current?.clarificationCount ?? 0) + 1,
    });
    await appendEventsTx(
      tx,
      runId,
      [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId: id, stage, question: redact(question), ...(deadline ? { deadline } : {}), ...(taskId ? { taskId } : {}) } }],
      { stepKey },
    );
    return { clarificationId: id, deadline };
  });
  return { kind: "clarification", clarificationId, tree, deadline };
}

/** What the asking stage reads when a person skipped its question. */
export const SKIPPED_ANSWER =
  "The person chose not to answer. Proceed with your best judgement, and state the assumption you made in your summary (or in the plan's risks).";

export async function readClarification({
  runId,
  clarificationId,
}: {
  runId: string;
  clarificationId: string;
}): Promise<WaitResult<{ answer: string; now: number; sentBack?: boolean }>> {
  const db = await getDb();
  const row = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, clarificationId) });
  if (!row) throw new AppError("not_found:clarification", `Clarification ${clarificationId} does not exist.`);
  if (row.status === "pending") {
    const run = await getRunState({ id: runId });
    if (run && TERMINAL_STATUSES.has(run.status)) return { state: "ended", status: run.status };
    await waitCheckHooks.afterPending?.({ runId, key: decisionKey.clarification(clarificationId) });
    return { state: "pending" };
  }
  await acknowledgeDecision({ runId, key: decisionKey.clarification(clarificationId) });
  if (row.status === "ignored") {
    // Skipped: best judgement, or back to planning with the question (the skip's event says which).
    const skip = (await listEvents({ runId, limit: 100_000 })).findLast(
      (e) => e.type === "CLARIFICATION_IGNORED" && (e.payload as { clarificationId?: string }).clarificationId === clarificationId,
    );
    const sentBack = (skip?.payload as { then?: string } | undefined)?.then === "planning";
    return { state: "done", answer: SKIPPED_ANSWER, now: workflowClock.now(), ...(sentBack ? { sentBack } : {}) };
  }
  if (row.status !== "answered") return { state: "ended", status: "cancelled" };
  return { state: "done", answer: answerText(row.response), now: workflowClock.now() };
}

function answerText(response: unknown): string {
  if (typeof response === "string") return response;
  if (Array.isArray(response)) return response.join(", ");
  if (response && typeof response === "object" && "fileName" in response) {
    const file = response as { fileName: string; contentBase64: string };
    const text = Buffer.from(file.contentBase64, "base64").toString("utf8");
    return `File ${file.fileName}:\n${text.slice(0, 20_000)}`;
  }
  return JSON.stringify(response);
}
