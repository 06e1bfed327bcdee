import { inngest } from "../client";
import { decisionNotify } from "../events";
import { deliver, NOTIFY_RETRIES } from "../notify";
import { planDeliveries } from "@/lib/notifications/dispatch";

/** Notify the people who may decide a gate or question, on every channel, each delivery in its own step (../notify). */
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
