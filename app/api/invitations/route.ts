import { json, route } from "@/lib/http";
import { listMyInvitations } from "@/lib/auth/invitations";

export const dynamic = "force-dynamic";

/** The caller's pending invitations. */
export const GET = route(async ({ user }) => {
  return json({ invitations: await listMyInvitations({ user }) });
});
