import { chatDeciders } from "@/inngest/chat";
import { handleTelegramWebhook } from "@/lib/chat/telegram";
import { route } from "@/lib/http";

export const dynamic = "force-dynamic";

/** A project's Telegram bot's updates. Public, but refused before its body is read without the webhook's secret token. */
export const POST = route<{ channelId: string }>({ public: true }, async ({ request, params }) =>
  handleTelegramWebhook({ request, channelId: params.channelId, deciders: chatDeciders }),
);
