import { eq } from "drizzle-orm";
import type { z } from "zod";
import { write } from "@/lib/db";
import { projects } from "@/lib/db/schema";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { AppError, describeIssues } from "@/lib/errors";
import { rateLimit } from "@/lib/security/rate-limit";
import { resolveRunConfig, runConfigSchema } from "@/lib/workflow/config";
import { defaultRouting } from "@/lib/ai";
import { checkRepositoryBinding } from "./binding";
import { asBindingConflict, assertRepositoryFree, createProject, getProject, type Project } from "./queries";
import type { createProjectSchema, updateProjectSchema } from "./schemas";

/** A project's default run config must be a valid partial RunConfig that resolves with the default routing (400 otherwise). */
export function checkDefaultConfig(defaultConfig: Record<string, unknown>): void {
  const checked = runConfigSchema.safeParse(defaultConfig);
  if (!checked.success) throw new AppError("bad_request:config", `defaultConfig.${describeIssues(checked.error.issues)}`);
  const resolved = resolveRunConfig({ input: {}, projectDefaults: defaultConfig, defaultRouting: defaultRouting() });
  if (!resolved.success) throw new AppError("bad_request:config", `defaultConfig.${describeIssues(resolved.error.issues)}`);
}

/**
 * Create a project (POST /api/projects): its default config validated as PATCH does, before anything is stored; creation
 * rate limited per user; the repository binding checked; the creator becomes its owner.
 */
export async function addProject({ user, input }: { user: SessionUser; input: z.output<typeof createProjectSchema> }): Promise<Project> {
  if (input.defaultConfig) checkDefaultConfig(input.defaultConfig);
  await rateLimit({ user, bucket: "projects" });
  const repository = await checkRepositoryBinding({ user, repository: input.repository });
  return createProject({ ...input, repository, ownerId: user.id });
}

/** Change a project's name, repository binding or default run config (owners only); the defaults must be a valid partial RunConfig. */
export async function updateProject({
  user,
  projectId,
  changes,
}: {
  user: SessionUser;
  projectId: string;
  changes: z.output<typeof updateProjectSchema>;
}) {
  const project = await getProject({ id: projectId });
  if (!project) throw new AppError("not_found:project");
  await requireProjectRole({ user, projectId, action: "manage" });
  const repository = changes.repository ? await checkRepositoryBinding({ user, repository: changes.repository }) : undefined;
  if (changes.defaultConfig) checkDefaultConfig(changes.defaultConfig);
  return write(async (tx) => {
    const repositoryKey = repository ? await assertRepositoryFree(tx, repository, projectId) : undefined;
    const [row] = await tx
      .update(projects)
      .set({
        ...(changes.name !== undefined ? { name: changes.name } : {}),
        ...(repository ? { repository, repositoryKey } : {}),
        ...(changes.defaultConfig ? { defaultConfig: changes.defaultConfig } : {}),
        updatedAt: new Date(),
      })
      .where(eq(projects.id, projectId))
      .returning();
    return row!;
  }).catch(asBindingConflict);
}
