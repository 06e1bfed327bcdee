import { and, asc, eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { projectMembers, projects, type ProjectRole, type RepositoryBinding } from "@/lib/db/schema";
import { newId } from "@/lib/ids";

export type Project = typeof projects.$inferSelect;

/** Create a project and make its creator the owner, in one transaction. */
export async function createProject({
  name,
  ownerId,
  repository,
  defaultConfig = {},
}: {
  name: string;
  ownerId: string;
  repository: RepositoryBinding;
  defaultConfig?: Record<string, unknown>;
}): Promise<Project> {
  return write(async (tx) => {
    const [project] = await tx
      .insert(projects)
      .values({ id: newId("prj"), name, ownerId, repository, defaultConfig })
      .returning();
    await tx.insert(projectMembers).values({ projectId: project!.id, userId: ownerId, role: "owner" });
    return project!;
  });
}

/** Projects the user is a member of, with their role. */
export async function listProjectsForUser({ userId }: { userId: string }) {
  const db = await getDb();
  const rows = await db
    .select({ project: projects, role: projectMembers.role })
    .from(projectMembers)
    .innerJoin(projects, eq(projects.id, projectMembers.projectId))
    .where(eq(projectMembers.userId, userId))
    .orderBy(asc(projects.createdAt));
  return rows.map((r) => ({ ...r.project, role: r.role }));
}

export async function getProject({ id }: { id: string }): Promise<Project | null> {
  const db = await getDb();
  return (await db.query.projects.findFirst({ where: eq(projects.id, id) })) ?? null;
}

export async function getMembership({ projectId, userId }: { projectId: string; userId: string }): Promise<ProjectRole | null> {
  const db = await getDb();
  const row = await db.query.projectMembers.findFirst({
    where: and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)),
  });
  return row?.role ?? null;
}

export async function setMember({ projectId, userId, role }: { projectId: string; userId: string; role: ProjectRole }) {
  await write(async (tx) => {
    await tx
      .insert(projectMembers)
      .values({ projectId, userId, role })
      .onConflictDoUpdate({ target: [projectMembers.projectId, projectMembers.userId], set: { role } });
  });
}
