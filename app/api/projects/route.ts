import { json, readJson, route } from "@/lib/http";
import { createProject, listProjectsForUser } from "@/lib/db/queries/projects";
import { createProjectSchema } from "@/lib/runs/schemas";
import { checkRepositoryBinding } from "@/lib/runs/projects";
import { checkDefaultConfig } from "@/lib/dashboard/projects";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const GET = route(async ({ user }) => {
  return json({ projects: await listProjectsForUser({ userId: user.id }) });
});

export const POST = route(async ({ request, user }) => {
  const body = await readJson(request, createProjectSchema);
  // Validated like PATCH does, before anything is stored; creation is rate limited per user.
  if (body.defaultConfig) checkDefaultConfig(body.defaultConfig);
  await rateLimit({ user, bucket: "projects" });
  const repository = await checkRepositoryBinding({ user, repository: body.repository });
  const project = await createProject({ ...body, repository, ownerId: user.id });
  return json({ project }, { status: 201 });
});
