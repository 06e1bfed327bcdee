import { json, readJson, route } from "@/lib/http";
import { createProject, listProjectsForUser } from "@/lib/db/queries/projects";
import { createProjectSchema } from "@/lib/runs/schemas";
import { checkRepositoryBinding } from "@/lib/runs/projects";

export const dynamic = "force-dynamic";

export const GET = route(async ({ user }) => {
  return json({ projects: await listProjectsForUser({ userId: user.id }) });
});

export const POST = route(async ({ request, user }) => {
  const body = await readJson(request, createProjectSchema);
  const repository = await checkRepositoryBinding({ user, repository: body.repository });
  const project = await createProject({ ...body, repository, ownerId: user.id });
  return json({ project }, { status: 201 });
});
