import { inngest } from "../client";
import { githubWebhookReceived, runStarted } from "../events";
import { handleDelivery } from "@/lib/runs/github-deliveries";

/**
 * The work of a GitHub webhook, off the request path: the route only verifies, stores and announces the delivery.
 * Runs created here (a /gatehouse comment, a follow-up on a review) are announced like POST /api/runs does.
 */
export const githubWebhook = inngest.createFunction(
  {
    id: "github-webhook",
    name: "GitHub: handle a webhook delivery",
    triggers: [githubWebhookReceived],
    idempotency: "event.data.deliveryId",
    retries: 5,
  },
  async ({ event, step }) => {
    const result = await step.run("handle", () => handleDelivery({ deliveryId: event.data.deliveryId }));
    for (const runId of result.startRuns) {
      await step.sendEvent(`start:${runId}`, runStarted.create({ runId }));
    }
    return result;
  },
);
