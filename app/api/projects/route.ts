import { json, readJson, route } from "@/lib/http";
import { listProjectsForUser } from "@/lib/projects/queries";
import { createProjectSchema } from "@/lib/projects/schemas";
import { addProject } from "@/lib/projects/settings";

export const dynamic = "force-dynamic";

export const GET = route(async ({ user }) => {
  return json({ projects: await listProjectsForUser({ userId: user.id }) });
});

export const POST = route(async ({ request, user }) => {
  const body = await readJson(request, createProjectSchema);
  const project = await addProject({ user, input: body });
  return json({ project }, { status: 201 });
});
