import { and, eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { projectMembers, type ProjectRole } from "@/lib/db/schema";

// Who is a member of which project with which role: read by the auth guard, so it lives below lib/auth (lib/projects
// uses lib/auth).

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
