import { registerTelegramWebhook } from "@/lib/chat/telegram";
import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";

export const dynamic = "force-dynamic";

/**
 * Register the project's Telegram bot's webhook with Telegram (setWebhook with its secret token), so it takes presses.
 * Only Telegram has one: Slack's request URLs are set in the app's manifest.
 */
export const POST = route<{ id: string }>(async ({ params, request, user }) => {
  // No fields; a body, if any, must be an empty JSON object (read capped, so an oversized one is a 413).
  await readOptionalJson(request, z.strictObject({}));
  return json(await registerTelegramWebhook({ user, projectId: params.id }));
});
