import type { GetStepTools } from "inngest";
import type { inngest } from "./client";
import { attemptDelivery, recordDeliveryFailure } from "@/lib/notifications/dispatch";

/*
 * Decision notices, off the run's path: the workflow only sends decisionNotify, so a channel that is down never blocks
 * or fails a run. Each delivery is its own step, retried by Inngest with backoff (durably: across restarts); when the
 * retries are spent the step's error comes back here, and the failure is recorded in the delivery log and on the run.
 * Used by the notify-decision and notify-redeliver functions.
 */

/** Attempts per delivery = RETRIES + 1, with Inngest's exponential backoff between them. */
export const NOTIFY_RETRIES = 4;

type Step = GetStepTools<typeof inngest>;

export async function deliver(step: Step, deliveryId: string, key: string): Promise<"delivered" | "failed" | "skipped"> {
  try {
    const result = await step.run(`send:${key}`, () => attemptDelivery({ deliveryId }));
    return result.status;
  } catch {
    await step.run(`failed:${key}`, () => recordDeliveryFailure({ deliveryId }));
    return "failed";
  }
}
