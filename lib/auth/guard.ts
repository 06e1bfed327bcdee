import { Auth } from "@auth/core";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { getMembership } from "@/lib/db/queries/members";
import { ensureLocalOwner, getUser, LOCAL_OWNER_ID } from "@/lib/db/queries/users";
import type { ProjectRole } from "@/lib/db/schema";
import { AUTH_BASE_PATH, getAuthConfig } from "./config";
import { safeEqual } from "./secret";
import { resolveApiToken } from "./tokens";

export type SessionUser = { id: string; name: string | null; via: "admin-token" | "api-token" | "session" };

/** Who is asking: a bearer token (admin token from env, or an API token) or an Auth.js session cookie. */
export async function getUserFromHeaders(headers: Headers, origin: string): Promise<SessionUser | null> {
  const authorization = headers.get("authorization");
  if (authorization) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
    if (!match) return null;
    const token = match[1]!;
    const admin = getEnv().GATEHOUSE_ADMIN_TOKEN;
    if (admin && safeEqual(token, admin)) {
      const owner = await ensureLocalOwner();
      return { id: owner.id, name: owner.name, via: "admin-token" };
    }
    const userId = await resolveApiToken(token);
    if (!userId) return null;
    const user = await getUser({ id: userId });
    return user ? { id: user.id, name: user.name, via: "api-token" } : null;
  }
  const cookie = headers.get("cookie");
  if (!cookie || !cookie.includes("authjs.")) return null;
  const response = await Auth(
    new Request(`${origin}${AUTH_BASE_PATH}/session`, { headers: { cookie } }),
    getAuthConfig(),
  );
  if (!response.ok) return null;
  const session = (await response.json().catch(() => null)) as { user?: { id?: string; name?: string } } | null;
  const id = session?.user?.id;
  if (!id) return null;
  const user = id === LOCAL_OWNER_ID ? await ensureLocalOwner() : await getUser({ id });
  return user ? { id: user.id, name: user.name, via: "session" } : null;
}

/** The caller, or AppError unauthorized:auth (→ 401). */
export async function requireUser(request: Request): Promise<SessionUser> {
  const user = await getUserFromHeaders(request.headers, new URL(request.url).origin);
  if (!user) throw new AppError("unauthorized:auth");
  return user;
}

/** Each role includes the ones below it (an owner may do what an approver may; an escalation to viewers reaches all). */
export const ROLE_RANK: Record<ProjectRole, number> = { viewer: 1, approver: 2, owner: 3 };
const RANK = ROLE_RANK;

/** What each role may do on a project. */
export type ProjectAction = "read" | "decide" | "manage";
const NEEDED: Record<ProjectAction, ProjectRole> = { read: "viewer", decide: "approver", manage: "owner" };

/** Whether a project role allows an action (the rule requireProjectRole applies; also who is notified of a decision). */
export function roleAllows(role: ProjectRole, action: ProjectAction): boolean {
  return RANK[role] >= RANK[NEEDED[action]];
}

/** The roles that may do `action` on a project: the rule requireProjectRole checks, for queries across projects. */
export function rolesAllowedTo(action: ProjectAction): ProjectRole[] {
  return (Object.keys(RANK) as ProjectRole[]).filter((role) => roleAllows(role, action));
}

/**
 * Check the caller's role on a project. A non-member gets 404 — the project and its runs do not exist for them; a
 * member without the needed role gets 403.
 */
export async function requireProjectRole({
  user,
  projectId,
  action,
  notFound = "not_found:project",
}: {
  user: SessionUser;
  projectId: string;
  action: ProjectAction;
  notFound?: "not_found:project" | "not_found:run" | "not_found:clarification";
}): Promise<ProjectRole> {
  const role = await getMembership({ projectId, userId: user.id });
  if (!role) throw new AppError(notFound);
  if (!roleAllows(role, action)) {
    throw new AppError("forbidden:auth", `Your role on this project is ${role}; this needs ${NEEDED[action]} or higher.`);
  }
  return role;
}
