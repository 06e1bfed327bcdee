import { requirePageUser } from "@/app/_server/session";
import { NewRunForm } from "@/components/runs/new-run-form";
import { listProjectsForUser } from "@/lib/projects/queries";
import { modelChoices } from "@/lib/dashboard/models";

export const dynamic = "force-dynamic";

export default async function NewRunPage({ searchParams }: { searchParams: Promise<{ project?: string }> }) {
  const user = await requirePageUser("/runs/new");
  const [{ project }, projects] = await Promise.all([searchParams, listProjectsForUser({ userId: user.id })]);
  const { choices, defaults } = modelChoices();
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">New run</h1>
        <p className="text-muted-foreground text-sm">Describe a change; choose where you want to decide and which models do the work.</p>
      </div>
      <NewRunForm
        projects={projects.filter((p) => p.role !== "viewer").map((p) => ({ id: p.id, name: p.name, defaultConfig: p.defaultConfig, repositoryType: p.repository.type }))}
        choices={choices}
        defaults={defaults}
        initialProjectId={project}
      />
    </div>
  );
}
