import { json, readJson, route } from "@/lib/http";
import { getProject } from "@/lib/projects/queries";
import { requireProjectRole } from "@/lib/auth/guard";
import { AppError } from "@/lib/errors";
import { updateProjectSchema } from "@/lib/projects/schemas";
import { updateProject } from "@/lib/projects/settings";

export const dynamic = "force-dynamic";

export const GET = route<{ id: string }>(async ({ params, user }) => {
  const role = await requireProjectRole({ user, projectId: params.id, action: "read" });
  const project = await getProject({ id: params.id });
  if (!project) throw new AppError("not_found:project");
  return json({ project: { ...project, role } });
});

/** Configure a project: name, repository binding, default run config (owners only). */
export const PATCH = route<{ id: string }>(async ({ request, params, user }) => {
  const changes = await readJson(request, updateProjectSchema);
  const project = await updateProject({ user, projectId: params.id, changes });
  return json({ project });
});
