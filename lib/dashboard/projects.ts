import { eq } from "drizzle-orm";
import { z } from "zod";
import { write } from "@/lib/db";
import { projects } from "@/lib/db/schema";
import { asBindingConflict, assertRepositoryFree, getProject } from "@/lib/db/queries/projects";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { AppError, describeIssues } from "@/lib/errors";
import { nameSchema } from "@/lib/plain-text";
import { repositorySchema } from "@/lib/runs/schemas";
import { checkRepositoryBinding } from "@/lib/runs/projects";
import { resolveRunConfig, runConfigSchema } from "@/lib/workflow/config";
import { defaultRouting } from "@/lib/ai";

export const updateProjectSchema = z.strictObject({
  name: nameSchema({ max: 200 }).optional(),
  repository: repositorySchema.optional(),
  defaultConfig: z.record(z.string(), z.unknown()).optional(),
});

/** A project's default run config must be a valid partial RunConfig that resolves with the default routing (400 otherwise). */
export function checkDefaultConfig(defaultConfig: Record<string, unknown>): void {
  const checked = runConfigSchema.safeParse(defaultConfig);
  if (!checked.success) throw new AppError("bad_request:config", `defaultConfig.${describeIssues(checked.error.issues)}`);
  const resolved = resolveRunConfig({ input: {}, projectDefaults: defaultConfig, defaultRouting: defaultRouting() });
  if (!resolved.success) throw new AppError("bad_request:config", `defaultConfig.${describeIssues(resolved.error.issues)}`);
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
