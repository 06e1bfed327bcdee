import { githubWebhookReceived } from "@/inngest/events";
import { inngest } from "@/inngest";
import { AppError } from "@/lib/errors";
import { forgetDelivery, receiveWebhook, recordDelivery } from "@/lib/github/webhooks";
import { json, route } from "@/lib/http";

/**
 * GitHub App webhooks. Public, but nothing is parsed before the HMAC signature over the raw body checks out; a delivery
 * id or a signed body seen before is acknowledged and ignored. The work happens in the github-webhook Inngest function.
 */
export const POST = route({ public: true }, async ({ request }) => {
  const delivery = await receiveWebhook(request);
  if (!(await recordDelivery(delivery))) return json({ ok: true, duplicate: true }, { status: 200 });
  try {
    await inngest.send(githubWebhookReceived.create({ deliveryId: delivery.deliveryId }, { id: `github-${delivery.deliveryId}` }));
  } catch {
    // Not queued: forget it, so GitHub's redelivery is handled instead of being taken for a replay.
    await forgetDelivery(delivery);
    throw new AppError("unavailable:github", "The webhook could not be queued; GitHub will redeliver it.");
  }
  return json({ ok: true }, { status: 202 });
});
