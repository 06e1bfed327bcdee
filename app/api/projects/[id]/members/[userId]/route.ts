import { json, readJson, route } from "@/lib/http";
import { removeMember, updateMember, updateMemberSchema } from "@/lib/auth/members";

export const dynamic = "force-dynamic";

export const PATCH = route<{ id: string; userId: string }>(async ({ request, params, user }) => {
  const body = await readJson(request, updateMemberSchema);
  const member = await updateMember({ user, projectId: params.id, userId: params.userId, role: body.role });
  return json({ member });
});

export const DELETE = route<{ id: string; userId: string }>(async ({ params, user }) => {
  await removeMember({ user, projectId: params.id, userId: params.userId });
  return new Response(null, { status: 204 });
});
