import { inngest } from "../client";
import { notificationRedeliver } from "../events";
import { deliver, NOTIFY_RETRIES } from "../notify";

/** A person asked to send a failed notification again (POST …/deliveries/:id/redeliver). */
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
