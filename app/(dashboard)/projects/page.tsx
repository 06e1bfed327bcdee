import { ProjectsView } from "@/components/projects/projects-view";

export default function ProjectsPage() {
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">Projects</h1>
        <p className="text-muted-foreground text-sm">Repositories Gatehouse works on, their default run settings and memory.</p>
      </div>
      <ProjectsView />
    </div>
  );
}
