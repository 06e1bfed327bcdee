import { and, eq, inArray } from "drizzle-orm";
import { write, type Db } from "@/lib/db";
import { gates, workflowEvents, workflowRuns } from "@/lib/db/schema";
import { appendEventsTx, findStepEvents, rowToState } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";
import { TERMINAL_STATUSES, type NewRunEvent, type RunState } from "@/lib/workflow";
import { append, RunEndedError, workflowClock } from "./context";

/*
 * One re-plan at a time per run. Parallel tasks (limits.maxConcurrentTasks) can each reach a re-plan — an implementer's
 * proposal, a debug step's "the plan is wrong", a question sent back to planning — at the same moment; the run's plan
 * must change once, through one plan gate. Whether a proposal leads a re-plan, joins the one under way, or is dropped
 * is decided here, inside one write transaction (so two tasks never both lead), and recorded (REPLAN_PROPOSED): the
 * workflow acts on this step's memoized result, never on which of its promises settled first.
 */

export type ReplanClaim =
  /** This proposal is the run's re-plan: draft it and open the plan gate (the planning stage started). */
  | { kind: "lead"; version: number; now: number }
  /** Another task's re-plan has its plan gate open: this proposal's reason is shown there, and its decision is this one's. */
  | { kind: "joined"; gateId: string; now: number }
  /** The run's plan changed (a re-plan approved) since this task's session began: its session ends, to run afresh. */
  | { kind: "outdated"; now: number }
  /** limits.maxReplans reached: no re-plan. */
  | { kind: "limit"; now: number }
  /** Another re-plan is being drafted, or the run waits for a person: look again after a while (nothing recorded). */
  | { kind: "busy"; now: number };

/**
 * Whether a re-plan was approved after this task's current session began (its latest branch cut): read where the
 * decision is stored, so it does not wait for the workflow to have taken in the approval.
 */
export async function planChangedSince(tx: Pick<Db, "select">, runId: string, taskId: string): Promise<boolean> {
  const rows = await tx
    .select({ type: workflowEvents.type, payload: workflowEvents.payload, sequence: workflowEvents.sequence })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), inArray(workflowEvents.type, ["TASK_BRANCH_CREATED", "APPROVAL_REQUESTED", "APPROVAL_GRANTED"])));
  let began = 0;
  const planGates = new Set<string>();
  const approvals: Array<{ gateId: string; sequence: number }> = [];
  for (const row of rows) {
    const p = row.payload as { taskId?: string; gateId?: string; kind?: string };
    if (row.type === "TASK_BRANCH_CREATED" && p.taskId === taskId) began = Math.max(began, row.sequence);
    else if (row.type === "APPROVAL_REQUESTED" && p.kind === "plan" && p.gateId) planGates.add(p.gateId);
    else if (row.type === "APPROVAL_GRANTED" && p.gateId) approvals.push({ gateId: p.gateId, sequence: row.sequence });
  }
  return began > 0 && approvals.some((a) => a.sequence > began && planGates.has(a.gateId));
}

/**
 * A re-plan proposed (by parallel task `taskId`, or by the run's own session when null): checked and recorded in one
 * transaction. Safe to run again after a crash: a proposal already recorded under this step key reads as it was.
 * `counted`: it counts toward limits.maxReplans (a person's sending back to planning does not).
 */
export async function claimReplan({
  runId,
  stepKey,
  taskId,
  reason,
  counted,
  maxReplans,
}: {
  runId: string;
  stepKey: string;
  taskId: string | null;
  reason: string;
  counted: boolean;
  maxReplans: number;
}): Promise<ReplanClaim> {
  return write(async (tx): Promise<ReplanClaim> => {
    const row = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (!row) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
    const state: RunState = rowToState(row);
    if (TERMINAL_STATUSES.has(state.status)) throw new RunEndedError(state.status);
    const now = workflowClock.now();
    const earlier = (await findStepEvents(tx, runId, stepKey)).find((e) => e.type === "REPLAN_PROPOSED");
    if (earlier?.type === "REPLAN_PROPOSED") {
      const { outcome, gateId } = earlier.payload;
      if (outcome === "planning") return { kind: "lead", version: Math.max(0, state.planVersion), now };
      if (outcome === "joined") return { kind: "joined", gateId: gateId!, now };
      return { kind: outcome, now };
    }
    const shown = redact(reason);
    const record = (payload: { outcome: "planning" | "joined" | "outdated" | "limit"; gateId?: string }, extra: NewRunEvent[] = []) =>
      appendEventsTx(tx, runId, [{ type: "REPLAN_PROPOSED", payload: { taskId, reason: shown, ...payload, ...(payload.outcome === "planning" ? { counted } : {}) } }, ...extra], { stepKey });
    // A proposal made against a plan the run no longer has is not re-planned: the task runs afresh under the new one.
    if (taskId && (await planChangedSince(tx, runId, taskId))) {
      await record({ outcome: "outdated" });
      return { kind: "outdated", now };
    }
    if (state.replanning) {
      const pending = state.pendingGate;
      if (state.status !== "awaiting_approval" || pending?.kind !== "plan") return { kind: "busy", now };
      // The re-plan's gate is open: this proposal joins it, its reason shown beside the re-plan's own.
      const gate = await tx.query.gates.findFirst({ where: eq(gates.id, pending.gateId) });
      if (!gate || gate.status !== "pending") return { kind: "busy", now };
      const context = (gate.context ?? {}) as Record<string, unknown>;
      const joined = Array.isArray(context.joined) ? (context.joined as unknown[]) : [];
      await tx.update(gates).set({ context: { ...context, joined: [...joined, { taskId, reason: shown }] } }).where(eq(gates.id, gate.id));
      await record({ outcome: "joined", gateId: gate.id });
      return { kind: "joined", gateId: gate.id, now };
    }
    if (counted && (state.replans ?? 0) >= maxReplans) {
      await record({ outcome: "limit" });
      return { kind: "limit", now };
    }
    // The run waits for a person (another task's question or gate): one wait at a time, so the re-plan waits its turn.
    if (state.status !== "running" || state.pendingGate || state.pendingClarification) return { kind: "busy", now };
    await record({ outcome: "planning" }, [{ type: "STAGE_STARTED", payload: { stage: "planning" } }]);
    return { kind: "lead", version: state.planVersion, now };
  });
}

/**
 * The re-plan under way ends: its planning stage completes and — when the caller implements on (`attempt`) — the
 * implementation stage starts again, in one append, so no other task's wait can open in between.
 */
export async function closeReplan({ runId, stepKey, attempt }: { runId: string; stepKey: string; attempt?: number }) {
  await append(runId, stepKey, [
    { type: "STAGE_COMPLETED", payload: { stage: "planning" } },
    ...(attempt !== undefined ? [{ type: "STAGE_STARTED" as const, payload: { stage: "implementation" as const, attempt } }] : []),
  ]);
  return { now: workflowClock.now() };
}
