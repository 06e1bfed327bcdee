import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import { decideInvitation } from "@/lib/auth/invitations";

export const dynamic = "force-dynamic";

/** Turn the invitation down (only the invitee; anyone else gets 404). */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await readOptionalJson(request, z.strictObject({}));
  const invitation = await decideInvitation({ user, invitationId: params.id, decision: "declined" });
  return json({ invitation });
});
