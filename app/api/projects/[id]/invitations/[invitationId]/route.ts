import { route } from "@/lib/http";
import { revokeInvitation } from "@/lib/auth/invitations";

export const dynamic = "force-dynamic";

/** Withdraw a pending invitation (owners only). */
export const DELETE = route<{ id: string; invitationId: string }>(async ({ params, user }) => {
  await revokeInvitation({ user, projectId: params.id, invitationId: params.invitationId });
  return new Response(null, { status: 204 });
});
