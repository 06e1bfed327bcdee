import { and, asc, eq, ne, count } from "drizzle-orm";
import { z } from "zod";
import { getDb, write } from "@/lib/db";
import { projectMembers, users, type ProjectRole } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import { requireProjectRole, type SessionUser } from "./guard";

export const roleSchema = z.enum(["owner", "approver", "viewer"], { error: 'must be "owner", "approver" or "viewer"' });

export const updateMemberSchema = z.strictObject({ role: roleSchema });

export type Member = { userId: string; name: string | null; email: string | null; image: string | null; role: ProjectRole; addedAt: string };

async function membersOf(projectId: string): Promise<Member[]> {
  const db = await getDb();
  const rows = await db
    .select({ userId: users.id, name: users.name, email: users.email, image: users.image, role: projectMembers.role, addedAt: projectMembers.createdAt })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .orderBy(asc(projectMembers.createdAt));
  return rows.map((r) => ({ ...r, addedAt: r.addedAt.toISOString() }));
}

/** Members of a project with their roles (owners only). */
export async function listMembers({ user, projectId }: { user: SessionUser; projectId: string }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  return membersOf(projectId);
}

/** Change a member's role (owners only). A project always keeps at least one owner. */
export async function updateMember({
  user,
  projectId,
  userId,
  role,
}: {
  user: SessionUser;
  projectId: string;
  userId: string;
  role: ProjectRole;
}): Promise<Member> {
  await requireProjectRole({ user, projectId, action: "manage" });
  await write(async (tx) => {
    const existing = await requireMember(tx, projectId, userId);
    if (existing.role === "owner" && role !== "owner") await ensureAnotherOwner(tx, projectId, userId);
    await tx
      .update(projectMembers)
      .set({ role })
      .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)));
  });
  return (await membersOf(projectId)).find((m) => m.userId === userId)!;
}

/** Remove a member (owners only); the last owner cannot be removed. */
export async function removeMember({ user, projectId, userId }: { user: SessionUser; projectId: string; userId: string }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  await write(async (tx) => {
    const existing = await requireMember(tx, projectId, userId);
    if (existing.role === "owner") await ensureAnotherOwner(tx, projectId, userId);
    await tx.delete(projectMembers).where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)));
  });
}

type Tx = Parameters<Parameters<typeof write>[0]>[0];

async function requireMember(tx: Tx, projectId: string, userId: string) {
  const existing = await tx.query.projectMembers.findFirst({
    where: and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)),
  });
  if (!existing) throw new AppError("not_found:api", "That user is not a member of this project.");
  return existing;
}

async function ensureAnotherOwner(tx: Tx, projectId: string, userId: string) {
  const [row] = await tx
    .select({ n: count() })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, "owner"), ne(projectMembers.userId, userId)));
  if (!row || row.n === 0) throw new AppError("conflict:project", "A project needs at least one owner; make someone else owner first.");
}
