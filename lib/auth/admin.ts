import { getEnv } from "@/lib/env";
import { getUser, LOCAL_OWNER_ID } from "@/lib/db/queries/users";
import type { SessionUser } from "./guard";

/**
 * An instance administrator administers the server itself (which directories it may touch), not just projects: the
 * local owner, plus users whose email is listed in GATEHOUSE_ADMIN_EMAILS.
 */
export async function isInstanceAdmin({ user }: { user: Pick<SessionUser, "id"> }): Promise<boolean> {
  if (user.id === LOCAL_OWNER_ID) return true;
  const admins = getEnv().GATEHOUSE_ADMIN_EMAILS;
  if (admins.length === 0) return false;
  const row = await getUser({ id: user.id });
  const email = row?.email?.trim().toLowerCase();
  return !!email && admins.includes(email);
}
