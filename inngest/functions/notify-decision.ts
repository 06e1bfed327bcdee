import { inngest } from "../client";
import { decisionNotify, notificationRedeliver } from "../events";
import { attemptDelivery, planDeliveries, recordDeliveryFailure } from "@/lib/notifications/dispatch";

/*
 * Decision notices, off the run's path: the workflow only sends decisionNotify, so a channel that is down never blocks
 * or fails a run. Each delivery is its own step, retried by Inngest with backoff (durably: across restarts); when the
 * retries are spent the step's error comes back here, and the failure is recorded in the delivery log and on the run.
 */

/** Attempts per delivery = RETRIES + 1, with Inngest's exponential backoff between them. */
export const NOTIFY_RETRIES = 4;

type Step = Parameters<Parameters<typeof inngest.createFunction>[1]>[0]["step"];

async function deliver(step: Step, deliveryId: string, key: string): Promise<"delivered" | "failed" | "skipped"> {
  try {
    const result = await step.run(`send:${key}`, () => attemptDelivery({ deliveryId }));
    return result.status;
  } catch {
    await step.run(`failed:${key}`, () => recordDeliveryFailure({ deliveryId }));
    return "failed";
  }
}

export const notifyDecision = inngest.createFunction(
  {
    id: "notify-decision",
    name: "Notify the people who may decide a gate or question",
    triggers: [decisionNotify],
    retries: NOTIFY_RETRIES,
  },
  async ({ event, step }) => {
    const planned = await step.run("plan", () => planDeliveries({ ...event.data, dispatchKey: event.id }));
    // In parallel: a slow or failing channel does not hold up the others.
    const outcomes = await Promise.all(planned.map((d) => deliver(step, d.id, d.id)));
    return { deliveries: planned.map((d, i) => ({ ...d, status: outcomes[i] })) };
  },
);

export const notifyRedeliver = inngest.createFunction(
  {
    id: "notify-redeliver",
    name: "Send a failed notification again",
    triggers: [notificationRedeliver],
    retries: NOTIFY_RETRIES,
  },
  async ({ event, step }) => {
    // The key carries the event id: a second redelivery of the same row is a new round of attempts.
    return { status: await deliver(step, event.data.deliveryId, `${event.data.deliveryId}:${event.id ?? "redeliver"}`) };
  },
);
