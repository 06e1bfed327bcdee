import { chatDeciders } from "@/inngest/chat";
import { handleSlackInteraction, readSlackRequest } from "@/lib/chat/slack";
import { json, route } from "@/lib/http";

export const dynamic = "force-dynamic";

/** Slack interactions (buttons, modal submissions). Public, but nothing is parsed before the v0 signature checks out. */
export const POST = route({ public: true }, async ({ request }) => {
  const raw = await readSlackRequest(request);
  const reply = await handleSlackInteraction({ raw, deciders: chatDeciders });
  return reply ? json(reply) : new Response(null, { status: 200 });
});
