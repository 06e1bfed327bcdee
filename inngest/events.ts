import { eventType } from "inngest";
import { z } from "zod";

/*
 * Gatehouse's Inngest events, declared once with schemas. Event names are never spelled as bare strings elsewhere.
 * Every one is an announcement of something already stored in the database: a lost or early announcement never
 * loses a decision, because the workflow re-reads the stored state.
 */

export const runStarted = eventType("run/started", { schema: z.object({ runId: z.string() }) });
export const runCancelled = eventType("run/cancelled", { schema: z.object({ runId: z.string() }) });
export const gateDecided = eventType("run/gate.decided", {
  schema: z.object({ runId: z.string(), gateId: z.string(), decision: z.string() }),
});
export const clarificationAnswered = eventType("run/clarification.answered", {
  schema: z.object({ runId: z.string(), clarificationId: z.string() }),
});
export const runResumed = eventType("run/resumed", {
  schema: z.object({ runId: z.string(), action: z.enum(["retry", "extend"]) }),
});
/** A person decided to merge a completed run (MERGE_DECIDED is stored); the run-merge function makes the merge. */
export const mergeDecided = eventType("run/merge.decided", { schema: z.object({ runId: z.string() }) });
/**
 * A run stopped computing (it ended, it waits for a person, or it went back to the queue): a slot of its user's
 * concurrency limit is free, so that user's queued runs check again.
 */
export const slotFreed = eventType("run/slot-freed", { schema: z.object({ runId: z.string(), userId: z.string() }) });
/**
 * A parallel task's wait for a person (a gate, a question, a pause) or its re-plan ended: the run may open another
 * wait now, so its tasks that found it busy (inngest/run/waits.ts, untilWaitCloses) look again at once. Sent by the
 * run itself, after the state that held the others is gone; a task that misses it looks again after its time-out.
 */
export const runWaitClosed = eventType("run/wait.closed", { schema: z.object({ runId: z.string() }) });
/** A GitHub webhook delivery was verified and stored (github_deliveries); the github-webhook function handles it. */
export const githubWebhookReceived = eventType("github/webhook.received", { schema: z.object({ deliveryId: z.string() }) });
/**
 * A decision (gateDecided, clarificationAnswered or runResumed) was stored and announced; the run-decision-reannounce
 * function repeats `announcement` until the workflow acknowledges `key` (lib/runs/gates/acks.ts), because Inngest's
 * waits do not see events sent before they were stored. With key `slot:<userId>` the announcement is a slotFreed,
 * repeated while one of that user's queued runs could start (slotWakeSettled in lib/runs/steps/start.ts).
 */
export const decisionAnnounced = eventType("run/decision.announced", {
  schema: z.object({
    runId: z.string(),
    key: z.string(),
    announcement: z.object({
      name: z.enum([gateDecided.name, clarificationAnswered.name, runResumed.name, slotFreed.name]),
      data: z.record(z.string(), z.unknown()),
    }),
  }),
});
/**
 * Someone may have to decide a gate or question: notify them on the project's channels and their own (lib/notifications,
 * inngest/functions/notify-decision.ts). Sent when one opens (the workflow), and for reminders, escalation and applied
 * defaults (deadlines). `recipients`: user ids to notify personally (default: everyone whose role may decide).
 */
export const decisionNotify = eventType("run/decision.notify", { schema: z.object({ runId: z.string(), subject: z.object({ type: z.enum(["gate", "clarification"]), id: z.string() }), reason: z.enum(["opened", "reminder", "escalated", "defaulted"]), recipients: z.array(z.string()).optional() }) });
/** A person asked to send a failed delivery again (POST …/deliveries/:id/redeliver); the delivery is pending again. */
/** A run completed, failed or paused (lib/runs/steps/notices.ts): its notice goes to the channels that take it. */
export const runNotice = eventType("run/notice", { schema: z.object({ runId: z.string(), kind: z.enum(["completed", "failed", "paused"]), key: z.string(), gateId: z.string().optional() }) });
export const notificationRedeliver = eventType("notification/redeliver", { schema: z.object({ deliveryId: z.string() }) });
