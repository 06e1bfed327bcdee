import { createLinkCode, listLinkedAccounts } from "@/lib/chat/link";
import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** The caller's linked Slack and Telegram accounts. */
export const GET = route(async ({ user }) => json({ accounts: await listLinkedAccounts({ user }) }));

/** A one-time code (10 minutes) to send to the Slack slash command or the Telegram bot. */
export const POST = route(async ({ request, user }) => {
  // No fields; a body, if any, must be an empty JSON object (read capped, so an oversized one is a 413).
  await readOptionalJson(request, z.strictObject({}));
  await rateLimit({ user, bucket: "decisions" });
  return json(await createLinkCode({ user }), { status: 201 });
});
