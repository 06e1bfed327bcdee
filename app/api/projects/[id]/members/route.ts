import { json, readJson, route } from "@/lib/http";
import { addMember, addMemberSchema, listMembers } from "@/lib/auth/members";

export const dynamic = "force-dynamic";

export const GET = route<{ id: string }>(async ({ params, user }) => {
  return json({ members: await listMembers({ user, projectId: params.id }) });
});

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  const body = await readJson(request, addMemberSchema);
  const member = await addMember({ user, projectId: params.id, ...body });
  return json({ member }, { status: 201 });
});
