import { json, readJson, route } from "@/lib/http";
import { listMembers } from "@/lib/auth/members";
import { inviteMember, inviteSchema } from "@/lib/auth/invitations";

export const dynamic = "force-dynamic";

export const GET = route<{ id: string }>(async ({ params, user }) => {
  return json({ members: await listMembers({ user, projectId: params.id }) });
});

/** Adding someone invites their email; they become a member when they accept. 202 whether or not they have an account. */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  const body = await readJson(request, inviteSchema);
  const invitation = await inviteMember({ user, projectId: params.id, ...body });
  return json({ invitation }, { status: 202 });
});
