import { registerTelegramWebhook } from "@/lib/chat/telegram";
import { AppError } from "@/lib/errors";
import { json, route } from "@/lib/http";

export const dynamic = "force-dynamic";

/** Register the project's Telegram bot's webhook with Telegram (setWebhook with its secret token), so it takes presses. */
export const POST = route<{ id: string; kind: string }>(async ({ params, user }) => {
  if (params.kind !== "telegram") throw new AppError("bad_request:chat", "kind: only a telegram channel registers a webhook (Slack's are set in the app's manifest).");
  return json(await registerTelegramWebhook({ user, projectId: params.id }));
});
