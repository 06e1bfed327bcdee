import { json, route } from "@/lib/http";
import { listProjectInvitations } from "@/lib/auth/invitations";

export const dynamic = "force-dynamic";

/** Pending invitations of a project (owners only). */
export const GET = route<{ id: string }>(async ({ params, user }) => {
  return json({ invitations: await listProjectInvitations({ user, projectId: params.id }) });
});
