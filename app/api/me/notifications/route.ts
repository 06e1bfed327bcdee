import { json, route } from "@/lib/http";
import { listPersonalChannels } from "@/lib/notifications/store";

export const dynamic = "force-dynamic";

/** The caller's own notification channels (their email, their Telegram chat). */
export const GET = route(async ({ user }) => {
  return json({ channels: await listPersonalChannels({ user }) });
});
