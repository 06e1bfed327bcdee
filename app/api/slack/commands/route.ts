import { chatDeciders } from "@/inngest/chat";
import { handleSlackCommand, readSlackRequest } from "@/lib/chat/slack";
import { json, route } from "@/lib/http";

export const dynamic = "force-dynamic";

/** The `/gatehouse` slash command. Public, but nothing is read before Slack's v0 signature checks out. */
export const POST = route({ public: true }, async ({ request }) => {
  const raw = await readSlackRequest(request);
  return json(await handleSlackCommand({ raw, deciders: chatDeciders }));
});
