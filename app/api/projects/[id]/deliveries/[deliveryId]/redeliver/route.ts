import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import { announce } from "@/inngest/announce";
import { notificationRedeliver } from "@/inngest/events";
import { resetForRedelivery } from "@/lib/notifications/dispatch";

export const dynamic = "force-dynamic";

/** Send a failed delivery again (owners): it is pending again at once, and notify-redeliver makes a new round of attempts. */
export const POST = route<{ id: string; deliveryId: string }>(async ({ request, params, user }) => {
  // No fields; an empty body or {} (read anyway, so an oversized one is refused like everywhere else).
  await readOptionalJson(request, z.strictObject({}));
  const delivery = await resetForRedelivery({ user, projectId: params.id, deliveryId: params.deliveryId });
  await announce(notificationRedeliver.create({ deliveryId: delivery.id }));
  return json({ delivery }, { status: 202 });
});
