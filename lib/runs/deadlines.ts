import { and, eq, sql } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { clarificationRequests, gates, projectMembers, workflowEvents, workflowRuns, type ProjectRole } from "@/lib/db/schema";
import { appendEventsTx, eventTypeIn, findStepEvents } from "@/lib/db/event-store";
import { getMembership } from "@/lib/db/queries/members";
import { ROLE_RANK } from "@/lib/auth/guard";
import {
  durationMs,
  TERMINAL_STATUSES,
  type DeadlineSubject,
  type DecisionDeadlineInfo,
  type DecisionSubject,
  type GateKind,
  type NewRunEvent,
  type PlanDocument,
  type RunConfig,
  type RunState,
} from "@/lib/workflow";
import { planHash } from "@/lib/workflow/plan-hash";

/*
 * Deadlines on decisions (config.deadlines; seed 000's HITL timeouts). The times are fixed when the gate or question
 * opens and carried on its event (APPROVAL_REQUESTED / CLARIFICATION_REQUESTED `deadline`), so the workflow's durable
 * waits replay the same schedule. Each function here is the body of ONE durable step, keyed by its step key.
 */

/** Who applied a decision that nobody took in time: the `by` of its events. */
export const BY_DEADLINE = "deadline";

/** A role escalated to includes the roles above it (an escalation to viewers reaches every member): guard's ranks. */
const RANK = ROLE_RANK;

/** The deadline a gate of `kind` (or a question) opened at `now` gets from the run's config; null without one. */
export function deadlineFor({ config, subject, now }: { config: RunConfig; subject: GateKind | "clarification"; now: number }): DecisionDeadlineInfo | null {
  const declared = config.deadlines?.[subject as DeadlineSubject];
  if (!declared) return null;
  const at = now + durationMs(declared.after);
  const reminders = [
    ...new Set(
      (declared.remind ?? []).map((point) => {
        const before = point.endsWith(" before");
        const ms = durationMs(before ? point.slice(0, -" before".length) : point);
        return before ? at - ms : now + ms;
      }),
    ),
  ]
    // A point outside the decision's open time (before it opened, at or past the deadline) would never be a reminder.
    .filter((t) => t > now && t < at)
    .sort((a, b) => a - b);
  return { at, reminders, onTimeout: declared.onTimeout };
}

async function stillPending(tx: Parameters<Parameters<typeof write>[0]>[0], subject: DecisionSubject): Promise<boolean> {
  if (subject.type === "gate") {
    const gate = await tx.query.gates.findFirst({ where: eq(gates.id, subject.id) });
    return gate?.status === "pending";
  }
  const question = await tx.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, subject.id) });
  return question?.status === "pending";
}

async function runOpen(tx: Parameters<Parameters<typeof write>[0]>[0], runId: string) {
  const run = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
  return run && !TERMINAL_STATUSES.has(run.status as RunState["status"]) ? run : null;
}

/** A reminder point passed: DECISION_REMINDED while the decision is still open (a decided one is left alone). */
export async function remind({
  runId,
  stepKey,
  subject,
  reminder,
  deadline,
}: {
  runId: string;
  stepKey: string;
  subject: DecisionSubject;
  reminder: number;
  deadline: number;
}): Promise<{ reminded: boolean }> {
  return write(async (tx) => {
    if ((await findStepEvents(tx, runId, stepKey)).length > 0) return { reminded: true };
    if (!(await runOpen(tx, runId)) || !(await stillPending(tx, subject))) return { reminded: false };
    await appendEventsTx(tx, runId, [{ type: "DECISION_REMINDED", payload: { subject, reminder, deadline } }], { stepKey });
    return { reminded: true };
  });
}

/**
 * A question's declared default as the answer to THIS question (config.deadlines.clarification is one default for every
 * question, so it cannot be checked against options when the config is saved). For a choice, the option it names
 * (trimmed, any case; a multiple choice may name several, comma-separated) becomes the typed answer; a default that
 * names no option is given as free text and marked `outsideOptions`, so the timeline, the people and the agent see it
 * was not one of the choices offered.
 */
export function defaultResponse(question: { responseType: string; options: string[] | null }, answer: string): { response: string | string[]; outsideOptions: boolean } {
  const options = question.options ?? [];
  const find = (text: string) => options.find((o) => o.trim().toLowerCase() === text.trim().toLowerCase());
  if (question.responseType === "single_choice" && options.length) {
    const option = find(answer);
    return option !== undefined ? { response: option, outsideOptions: false } : { response: answer, outsideOptions: true };
  }
  if (question.responseType === "multiple_choice" && options.length) {
    const named = answer.split(",").map((part) => part.trim()).filter(Boolean);
    const chosen = named.map(find);
    return named.length && chosen.every((o) => o !== undefined) ? { response: [...new Set(chosen as string[])], outsideOptions: false } : { response: answer, outsideOptions: true };
  }
  return { response: answer, outsideOptions: false };
}

export type TimeoutOutcome =
  | { kind: "decided" }
  | { kind: "escalated"; recipients: string[] }
  | { kind: "defaulted" }
  | { kind: "cancelled" };

/**
 * The deadline passed. In one transaction, and only while the decision is still open (a person who decided in the
 * last instant wins): DECISION_TIMED_OUT, then the configured action — escalate (DECISION_ESCALATED: the backup may
 * now decide, see mayDecideEscalated), the declared default as the decision (DECISION_DEFAULTED and the decision's
 * own event, by "deadline"), or cancel the run (RUN_CANCELLED, its open gates and questions closed).
 */
export async function timeOut({
  runId,
  stepKey,
  subject,
  deadline,
}: {
  runId: string;
  stepKey: string;
  subject: DecisionSubject;
  deadline: DecisionDeadlineInfo;
}): Promise<TimeoutOutcome> {
  const { onTimeout } = deadline;
  return write(async (tx): Promise<TimeoutOutcome> => {
    const earlier = await findStepEvents(tx, runId, stepKey);
    if (earlier.length > 0) return outcomeOf(earlier.map((e) => e));
    const run = await runOpen(tx, runId);
    if (!run || !(await stillPending(tx, subject))) return { kind: "decided" };
    const timedOut: NewRunEvent = { type: "DECISION_TIMED_OUT", payload: { subject, deadline: deadline.at, action: onTimeout.action } };

    if (onTimeout.action === "escalate") {
      const recipients =
        "userId" in onTimeout.to
          ? [onTimeout.to.userId]
          : (await tx.select({ userId: projectMembers.userId, role: projectMembers.role }).from(projectMembers).where(eq(projectMembers.projectId, run.projectId)))
              .filter((m) => RANK[m.role] >= RANK[(onTimeout.to as { role: ProjectRole }).role])
              .map((m) => m.userId);
      await appendEventsTx(tx, runId, [timedOut, { type: "DECISION_ESCALATED", payload: { subject, to: onTimeout.to, recipients } }], { stepKey });
      return { kind: "escalated", recipients };
    }

    if (onTimeout.action === "cancel") {
      await appendEventsTx(tx, runId, [timedOut, { type: "RUN_CANCELLED", payload: { by: BY_DEADLINE, reason: "nobody decided by the deadline" } }], { stepKey });
      await tx.update(gates).set({ status: "cancelled", decidedAt: new Date(), decidedBy: BY_DEADLINE }).where(and(eq(gates.workflowRunId, runId), eq(gates.status, "pending")));
      await tx
        .update(clarificationRequests)
        .set({ status: "cancelled" })
        .where(and(eq(clarificationRequests.workflowRunId, runId), eq(clarificationRequests.status, "pending")));
      return { kind: "cancelled" };
    }

    const answer = onTimeout.answer;
    const note = `No decision by the deadline; the declared default (${answer}) applied.`;
    const defaulted: NewRunEvent = { type: "DECISION_DEFAULTED", payload: { subject, answer } };
    if (subject.type === "clarification") {
      const question = (await tx.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, subject.id) }))!;
      const { response, outsideOptions } = defaultResponse(question, answer);
      await tx
        .update(clarificationRequests)
        .set({ status: "answered", response, answeredBy: BY_DEADLINE, answeredAt: new Date() })
        .where(and(eq(clarificationRequests.id, subject.id), eq(clarificationRequests.status, "pending")));
      if (outsideOptions) defaulted.payload = { subject, answer, outsideOptions };
      await appendEventsTx(tx, runId, [timedOut, defaulted, { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: subject.id, by: BY_DEADLINE } }], { stepKey });
      return { kind: "defaulted" };
    }
    const gate = (await tx.query.gates.findFirst({ where: eq(gates.id, subject.id) }))!;
    const decision: NewRunEvent[] =
      gate.kind === "fix"
        ? [
            { type: "FIX_DECISION_MADE", payload: { gateId: gate.id, by: BY_DEADLINE, decision: answer as "retry" | "accept" | "cancel" } },
            ...(answer === "cancel" ? [{ type: "RUN_CANCELLED", payload: { by: BY_DEADLINE, reason: note } } satisfies NewRunEvent] : []),
          ]
        : answer === "approve"
          ? [{ type: "APPROVAL_GRANTED", payload: { gateId: gate.id, by: BY_DEADLINE, notes: note, editedPlan: false, ...approvedHash(gate) } }]
          : [{ type: "APPROVAL_REJECTED", payload: { gateId: gate.id, by: BY_DEADLINE, feedback: note } }];
    const status = gate.kind === "fix" ? "decided" : answer === "approve" ? "approved" : "rejected";
    await tx
      .update(gates)
      .set({ status, decision: answer, decidedBy: BY_DEADLINE, decidedAt: new Date(), notes: note })
      .where(and(eq(gates.id, gate.id), eq(gates.status, "pending")));
    await appendEventsTx(tx, runId, [timedOut, defaulted, ...decision], { stepKey });
    // A fix gate's default "cancel" ends the run like POST /cancel (the workflow then sends run/cancelled).
    return gate.kind === "fix" && answer === "cancel" ? { kind: "cancelled" } : { kind: "defaulted" };
  });
}

/** A re-run of the timeout step reads what it did from its stored events. */
function outcomeOf(events: Array<{ type: string; payload: unknown }>): TimeoutOutcome {
  const escalated = events.find((e) => e.type === "DECISION_ESCALATED");
  if (escalated) return { kind: "escalated", recipients: (escalated.payload as { recipients: string[] }).recipients };
  if (events.some((e) => e.type === "RUN_CANCELLED")) return { kind: "cancelled" };
  if (events.some((e) => e.type === "DECISION_DEFAULTED")) return { kind: "defaulted" };
  return { kind: "decided" };
}

/** As a person's approval records it (lib/runs/gates/decide-gate.ts): the hash of the plan a plan gate approves, frozen. */
function approvedHash(gate: typeof gates.$inferSelect): { planHash?: string } {
  const plan = gate.kind === "plan" ? (gate.context as { plan?: PlanDocument } | null)?.plan : undefined;
  return plan ? { planHash: planHash(plan) } : {};
}

/**
 * Whether `userId` may decide `subject` as its backup approver: the decision was escalated (DECISION_ESCALATED) to
 * them by name, or to a project role they hold (or a higher one). Being a member at all is still needed to see it.
 */
export async function mayDecideEscalated({ runId, projectId, subject, userId }: { runId: string; projectId: string; subject: DecisionSubject; userId: string }): Promise<boolean> {
  const db = await getDb();
  const rows = await db
    .select({ payload: workflowEvents.payload })
    .from(workflowEvents)
    .where(
      and(
        eq(workflowEvents.workflowRunId, runId),
        eventTypeIn(["DECISION_ESCALATED"]),
        sql`json_extract(${workflowEvents.payload}, '$.subject.id') = ${subject.id}`,
      ),
    );
  if (rows.length === 0) return false;
  const role = await getMembership({ projectId, userId });
  if (!role) return false;
  return rows.some((row) => {
    const to = (row.payload as { to: { role: ProjectRole } | { userId: string } }).to;
    return "userId" in to ? to.userId === userId : RANK[role] >= RANK[to.role];
  });
}

/** A decision's deadline as the dashboard shows it: when, what then, and whether it has passed or escalated. */
export type DeadlineView = DecisionDeadlineInfo & {
  /** Reminders sent so far. */
  reminded: number;
  timedOut: boolean;
  escalated: { to: { role: ProjectRole } | { userId: string }; recipients: string[] } | null;
  /** The named backup approver's display name (set by the run detail, which knows the run's people). */
  escalatesToName?: string | null;
};

/** The deadlines of a run's gates and questions, by gate or clarification id (those without one are absent). */
export async function deadlineViews({ runId }: { runId: string }): Promise<Record<string, DeadlineView>> {
  const db = await getDb();
  const rows = await db
    .select({ type: workflowEvents.type, payload: workflowEvents.payload })
    .from(workflowEvents)
    .where(
      and(
        eq(workflowEvents.workflowRunId, runId),
        eventTypeIn(["APPROVAL_REQUESTED", "CLARIFICATION_REQUESTED", "DECISION_REMINDED", "DECISION_TIMED_OUT", "DECISION_ESCALATED"]),
      ),
    )
    .orderBy(workflowEvents.sequence);
  const views: Record<string, DeadlineView> = {};
  for (const { type, payload } of rows) {
    const p = payload as Record<string, unknown> & { subject?: DecisionSubject; deadline?: unknown };
    if (type === "APPROVAL_REQUESTED" || type === "CLARIFICATION_REQUESTED") {
      const id = (type === "APPROVAL_REQUESTED" ? p.gateId : p.clarificationId) as string;
      if (p.deadline && typeof p.deadline === "object") views[id] = { ...(p.deadline as DecisionDeadlineInfo), reminded: 0, timedOut: false, escalated: null };
      continue;
    }
    const view = p.subject ? views[p.subject.id] : undefined;
    if (!view) continue;
    if (type === "DECISION_REMINDED") view.reminded += 1;
    if (type === "DECISION_TIMED_OUT") view.timedOut = true;
    if (type === "DECISION_ESCALATED") view.escalated = { to: p.to as NonNullable<DeadlineView["escalated"]>["to"], recipients: (p.recipients as string[]) ?? [] };
  }
  return views;
}
