import { and, asc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import { getDb, write } from "@/lib/db";
import { projectInvitations, projectMembers, projects, users, type InvitationStatus, type ProjectRole } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { requireProjectRole, type SessionUser } from "./guard";
import { holdsSecret } from "@/lib/redact";

/** An address or a name that identifies something is refused, not stored redacted, when it holds a key (issue #29.7). */
const NO_SECRET = "must not hold a secret (an API key or token)";
import { roleSchema } from "./members";

/*
 * Membership by consent: an owner invites an email with a role, and the person with that email accepts (or declines)
 * once signed in — whether their account existed at the time of the invitation or not. The owner's answer is the same
 * either way, so inviting never reveals who has an account here.
 */

export const inviteSchema = z.strictObject({
  email: z.string().trim().toLowerCase().email("must be an email address").max(320).refine((v) => !holdsSecret(v), NO_SECRET),
  role: roleSchema,
});

export type InvitationView = { email: string; role: ProjectRole; status: InvitationStatus };

/** Invite an email to a project (owners only). Inviting again replaces the pending invitation's role. */
export async function inviteMember({
  user,
  projectId,
  email,
  role,
}: {
  user: SessionUser;
  projectId: string;
  email: string;
  role: ProjectRole;
}): Promise<InvitationView> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const address = email.trim().toLowerCase();
  await write(async (tx) => {
    // Members are listed to owners anyway, so saying so reveals nothing an owner cannot see.
    const [member] = await tx
      .select({ role: projectMembers.role })
      .from(projectMembers)
      .innerJoin(users, eq(users.id, projectMembers.userId))
      .where(and(eq(projectMembers.projectId, projectId), sql`lower(${users.email}) = ${address}`))
      .limit(1);
    if (member) throw new AppError("conflict:project", `${address} is already a member (${member.role}); change their role instead.`);
    await tx
      .insert(projectInvitations)
      .values({ id: newId("inv"), projectId, email: address, role, invitedBy: user.id })
      .onConflictDoUpdate({
        target: [projectInvitations.projectId, projectInvitations.email],
        targetWhere: sql`${projectInvitations.status} = 'pending'`,
        set: { role, invitedBy: user.id },
      });
  });
  return { email: address, role, status: "pending" };
}

/** Pending invitations of a project (owners only). */
export async function listProjectInvitations({ user, projectId }: { user: SessionUser; projectId: string }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  const db = await getDb();
  const rows = await db
    .select()
    .from(projectInvitations)
    .where(and(eq(projectInvitations.projectId, projectId), eq(projectInvitations.status, "pending")))
    .orderBy(asc(projectInvitations.createdAt));
  return rows.map((r) => ({ id: r.id, email: r.email, role: r.role, status: r.status, createdAt: r.createdAt.toISOString() }));
}

/** Withdraw a pending invitation (owners only). */
export async function revokeInvitation({ user, projectId, invitationId }: { user: SessionUser; projectId: string; invitationId: string }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  await write(async (tx) => {
    const [row] = await tx
      .update(projectInvitations)
      .set({ status: "revoked", decidedAt: new Date() })
      .where(and(eq(projectInvitations.id, invitationId), eq(projectInvitations.projectId, projectId), eq(projectInvitations.status, "pending")))
      .returning({ id: projectInvitations.id });
    if (!row) throw new AppError("not_found:api", "No pending invitation with that id on this project.");
  });
}

async function emailOf(user: SessionUser): Promise<string | null> {
  const db = await getDb();
  const row = await db.query.users.findFirst({ where: eq(users.id, user.id) });
  return row?.email?.trim().toLowerCase() || null;
}

/** The caller's pending invitations (by the email their sign-in vouched for), with the project's name and the inviter. */
export async function listMyInvitations({ user }: { user: SessionUser }) {
  const email = await emailOf(user);
  if (!email) return [];
  const db = await getDb();
  const rows = await db
    .select({
      id: projectInvitations.id,
      projectId: projectInvitations.projectId,
      projectName: projects.name,
      role: projectInvitations.role,
      invitedBy: users.name,
      createdAt: projectInvitations.createdAt,
    })
    .from(projectInvitations)
    .innerJoin(projects, eq(projects.id, projectInvitations.projectId))
    .leftJoin(users, eq(users.id, projectInvitations.invitedBy))
    .where(and(eq(projectInvitations.email, email), eq(projectInvitations.status, "pending")))
    .orderBy(asc(projectInvitations.createdAt));
  return rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString() }));
}

/**
 * Accept or decline one of the caller's pending invitations. Someone else's (or a decided one) is 404. Accepting adds
 * the membership in the same transaction; an existing membership keeps its role.
 */
export async function decideInvitation({
  user,
  invitationId,
  decision,
}: {
  user: SessionUser;
  invitationId: string;
  decision: "accepted" | "declined";
}): Promise<{ projectId: string; role: ProjectRole; status: InvitationStatus }> {
  const email = await emailOf(user);
  const notFound = () => new AppError("not_found:api", "No pending invitation with that id for you.");
  if (!email) throw notFound();
  return write(async (tx) => {
    const [row] = await tx
      .update(projectInvitations)
      .set({ status: decision, decidedAt: new Date() })
      .where(and(eq(projectInvitations.id, invitationId), eq(projectInvitations.email, email), eq(projectInvitations.status, "pending")))
      .returning();
    if (!row) throw notFound();
    if (decision === "accepted") {
      await tx.insert(projectMembers).values({ projectId: row.projectId, userId: user.id, role: row.role }).onConflictDoNothing();
    }
    return { projectId: row.projectId, role: row.role, status: decision };
  });
}
