import { and, asc, eq, ne, sql } from "drizzle-orm";
import { getDb, write, type Tx } from "@/lib/db";
import { projectMembers, projects, type RepositoryBinding } from "@/lib/db/schema";
import { isRepositoryKeyConflict, repositoryKeyOf } from "@/lib/db/repository-key";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";

export type Project = typeof projects.$inferSelect;

/** Says nothing about the other project: its name, id and members stay private. */
export const alreadyBound = () =>
  new AppError("conflict:project", "repository: this repository is already bound to another project.");

/**
 * One project per repository. The unique repository_key is the guarantee (concurrent writers, other processes); this
 * also catches a GitHub repository bound once by id and once by name only (no id was known then).
 */
export async function assertRepositoryFree(tx: Tx, repository: RepositoryBinding, exceptProjectId?: string): Promise<string> {
  const key = repositoryKeyOf(repository);
  const sameKey = eq(projects.repositoryKey, key);
  const sameGitHubName =
    repository.type === "github"
      ? and(
          sql`json_extract(${projects.repository}, '$.type') = 'github'`,
          sql`lower(json_extract(${projects.repository}, '$.owner')) = ${repository.owner.toLowerCase()}`,
          sql`lower(json_extract(${projects.repository}, '$.repo')) = ${repository.repo.toLowerCase()}`,
        )
      : undefined;
  const [taken] = await tx
    .select({ id: projects.id })
    .from(projects)
    .where(and(sameGitHubName ? sql`(${sameKey} or ${sameGitHubName})` : sameKey, exceptProjectId ? ne(projects.id, exceptProjectId) : undefined))
    .limit(1);
  if (taken) throw alreadyBound();
  return key;
}

/** Rethrow a unique-index refusal of the repository key as the same 409 the check above gives. */
export function asBindingConflict(error: unknown): never {
  if (isRepositoryKeyConflict(error)) throw alreadyBound();
  throw error;
}

/** Create a project and make its creator the owner, in one transaction. A repository already bound elsewhere → 409. */
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
    const repositoryKey = await assertRepositoryFree(tx, repository);
    const [project] = await tx
      .insert(projects)
      .values({ id: newId("prj"), name, ownerId, repository, repositoryKey, defaultConfig })
      .returning();
    await tx.insert(projectMembers).values({ projectId: project!.id, userId: ownerId, role: "owner" });
    return project!;
  }).catch(asBindingConflict);
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
