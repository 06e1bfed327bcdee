"use client";

import Link from "next/link";
import { useState } from "react";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Badge } from "@/components/ui/badge";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { RadioGroup, RadioGroupItem } from "@/components/ui/radio-group";
import { Skeleton } from "@/components/ui/skeleton";
import { Textarea } from "@/components/ui/textarea";
import { Markdown } from "@/components/runs/markdown";
import { settingLines } from "@/lib/dashboard/format";
import { apiSend, runKeys, type Project } from "@/components/runs/api";
import { useProjects } from "@/components/runs/use-projects";
import { MyInvitations, ProjectInvitations } from "./invitations";
import { ProjectNotifications } from "./project-notifications";
import { ProjectMcpServers } from "./project-mcp-servers";
import { EvalResults } from "./eval-results";
import { emptyGitHubPick, GitHubRepositoryPicker, useInstallationRepositories, validateGitHubPick, type GitHubPick } from "./github-repository-picker";

function repoLabel(p: Project) {
  return p.repository.type === "local" ? p.repository.path : `github.com/${p.repository.owner}/${p.repository.repo}`;
}

export function ProjectsView() {
  const projects = useProjects();
  return (
    <div className="grid gap-6 lg:grid-cols-[1fr_22rem]">
      <div className="min-w-0 space-y-4">
        <MyInvitations />
        {projects.isPending ? (
          <Skeleton className="h-32 w-full" />
        ) : projects.error ? (
          <p role="alert" className="text-destructive text-sm">
            Could not load projects: {projects.error.message} Reload the page to try again.
          </p>
        ) : projects.data.length === 0 ? (
          <Card data-testid="projects-empty">
            <CardContent className="text-muted-foreground text-sm">
              No projects yet. A project binds Gatehouse to a git repository; create one with the form.
            </CardContent>
          </Card>
        ) : (
          projects.data.map((p) => <ProjectCard key={p.id} project={p} />)
        )}
      </div>
      <CreateProject />
    </div>
  );
}

function ProjectCard({ project }: { project: Project }) {
  const queryClient = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(project.name);
  const [config, setConfig] = useState(JSON.stringify(project.defaultConfig ?? {}, null, 2));
  const [jsonError, setJsonError] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (body: unknown) => apiSend(`/api/projects/${project.id}`, body, "PATCH"),
    onSuccess: async () => {
      toast.success("Project saved");
      setEditing(false);
      await queryClient.invalidateQueries({ queryKey: runKeys.projects });
    },
  });
  const canManage = project.role === undefined || project.role === "owner";
  // Loaded when opened: the delivery log polls, and a closed section need not.
  const [notificationsOpen, setNotificationsOpen] = useState(false);
  const [evalsOpen, setEvalsOpen] = useState(false);
  const [mcpOpen, setMcpOpen] = useState(false);
  return (
    <Card data-testid="project-card">
      <CardHeader>
        <CardTitle className="flex items-center gap-2">
          {project.name}
          {project.role && <Badge variant="outline">{project.role}</Badge>}
        </CardTitle>
        <CardDescription className="font-mono text-xs break-all">
          {project.repository.type} · {repoLabel(project)}
        </CardDescription>
      </CardHeader>
      <CardContent className="space-y-4">
        {editing ? (
          <>
            <div className="grid gap-2">
              <Label htmlFor={`name-${project.id}`}>Name</Label>
              <Input id={`name-${project.id}`} value={name} onChange={(e) => setName(e.target.value)} />
            </div>
            <div className="grid gap-2">
              <Label htmlFor={`config-${project.id}`}>Default run config (JSON, as in .autonomous/config.json)</Label>
              <Textarea
                id={`config-${project.id}`}
                rows={10}
                className="font-mono text-xs"
                value={config}
                onChange={(e) => setConfig(e.target.value)}
                aria-invalid={!!jsonError}
              />
              <p className="text-muted-foreground text-xs">
                e.g. {`{"trustMode": {"planning": "manual"}, "maxClarifications": 3, "git": {"baseBranch": "main"}}`}
              </p>
              {jsonError && <p className="text-destructive text-xs">{jsonError}</p>}
            </div>
            {save.error && (
              <Alert variant="destructive">
                <AlertTitle>Not saved</AlertTitle>
                <AlertDescription>{save.error.message}</AlertDescription>
              </Alert>
            )}
          </>
        ) : (
          <div className="space-y-1">
            <h3 className="text-sm font-semibold">Default run config</h3>
            <DefaultConfig config={project.defaultConfig ?? {}} />
          </div>
        )}
        {canManage && (
          <details>
            <summary className="cursor-pointer text-sm font-semibold">Members and invitations</summary>
            <div className="pt-2">
              <ProjectInvitations projectId={project.id} />
            </div>
          </details>
        )}
        {canManage && (
          <details onToggle={(e) => setNotificationsOpen(e.currentTarget.open)}>
            <summary className="cursor-pointer text-sm font-semibold">Notifications</summary>
            <div className="pt-2">{notificationsOpen && <ProjectNotifications projectId={project.id} />}</div>
          </details>
        )}
        {canManage && (
          <details onToggle={(e) => setMcpOpen(e.currentTarget.open)} data-testid="mcp-section">
            <summary className="cursor-pointer text-sm font-semibold">MCP servers</summary>
            <div className="pt-2">{mcpOpen && <ProjectMcpServers project={project} />}</div>
          </details>
        )}
        <details onToggle={(e) => setEvalsOpen(e.currentTarget.open)}>
          <summary className="cursor-pointer text-sm font-semibold">Eval results (npm run eval)</summary>
          <div className="pt-2">{evalsOpen && <EvalResults projectId={project.id} />}</div>
        </details>
        <details>
          <summary className="cursor-pointer text-sm font-semibold">Project memory (.autonomous/memory.md)</summary>
          <div className="pt-2">
            {project.memory ? <Markdown>{project.memory}</Markdown> : <p className="text-muted-foreground text-sm">No memory yet: it appears once a delivered run is merged into the base branch.</p>}
          </div>
        </details>
      </CardContent>
      <CardFooter className="flex gap-2">
        {editing ? (
          <>
            <Button
              disabled={save.isPending}
              onClick={() => {
                let parsed: unknown;
                try {
                  parsed = JSON.parse(config || "{}");
                } catch {
                  setJsonError("This is not valid JSON.");
                  return;
                }
                setJsonError(null);
                save.mutate({ name, defaultConfig: parsed });
              }}
            >
              Save
            </Button>
            <Button variant="ghost" onClick={() => setEditing(false)}>
              Cancel
            </Button>
          </>
        ) : (
          <>
            <Button asChild size="sm">
              <Link href={`/runs/new?project=${project.id}`}>New run</Link>
            </Button>
            <Button asChild size="sm" variant="outline">
              <Link href={`/?project=${project.id}`}>Runs</Link>
            </Button>
            {canManage && (
              <Button size="sm" variant="outline" onClick={() => setEditing(true)}>
                Configure
              </Button>
            )}
          </>
        )}
      </CardFooter>
    </Card>
  );
}

function CreateProject() {
  const queryClient = useQueryClient();
  const [type, setType] = useState<"local" | "github">("local");
  const [name, setName] = useState("");
  const [path, setPath] = useState("");
  const [github, setGithub] = useState<GitHubPick>(emptyGitHubPick);
  const repositories = useInstallationRepositories({ enabled: type === "github" });
  const listed = !!repositories.data?.repositories.length;
  const [errors, setErrors] = useState<Record<string, string>>({});
  const create = useMutation({
    mutationFn: (body: unknown) => apiSend<{ project: Project }>("/api/projects", body),
    onSuccess: async ({ project }) => {
      toast.success(`Project ${project.name} created`);
      setName("");
      setPath("");
      setGithub(emptyGitHubPick);
      await queryClient.invalidateQueries({ queryKey: runKeys.projects });
    },
  });
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    // A new attempt answers the last one: its server error must not stay under the new validation errors.
    create.reset();
    const found: Record<string, string> = {};
    if (!name.trim()) found.name = "Give the project a name.";
    if (type === "local" && !path.trim().startsWith("/")) found.path = "Enter the absolute path of a git repository on the server.";
    if (type === "github") Object.assign(found, validateGitHubPick({ pick: github, listed }));
    setErrors(found);
    if (Object.keys(found).length) return;
    const { owner, repo, installationId } = github;
    create.mutate({
      name: name.trim(),
      repository:
        type === "local"
          ? { type, path: path.trim() }
          : { type, owner: owner.trim(), repo: repo.trim(), ...(github.manual || !installationId ? {} : { installationId }) },
    });
  };
  const err = (k: string) => errors[k] && <p className="text-destructive text-xs">{errors[k]}</p>;
  return (
    <Card className="h-fit">
      <form onSubmit={submit} noValidate data-testid="create-project">
        <CardHeader>
          <CardTitle>New project</CardTitle>
          <CardDescription>Bind a repository; runs work on branches of it.</CardDescription>
        </CardHeader>
        <CardContent className="space-y-4 py-4">
          <div className="grid gap-2">
            <Label htmlFor="project-name">Name</Label>
            <Input id="project-name" value={name} onChange={(e) => setName(e.target.value)} aria-invalid={!!errors.name} />
            {err("name")}
          </div>
          <fieldset className="grid gap-2">
            <legend className="mb-2 text-sm font-medium">Repository</legend>
            <RadioGroup value={type} onValueChange={(v) => setType(v as "local" | "github")} className="flex gap-4">
              <div className="flex items-center gap-2">
                <RadioGroupItem value="local" id="repo-local" />
                <Label htmlFor="repo-local" className="font-normal">
                  Local git
                </Label>
              </div>
              <div className="flex items-center gap-2">
                <RadioGroupItem value="github" id="repo-github" />
                <Label htmlFor="repo-github" className="font-normal">
                  GitHub
                </Label>
              </div>
            </RadioGroup>
          </fieldset>
          {type === "local" ? (
            <div className="grid gap-2">
              <Label htmlFor="project-path">Path on the server</Label>
              <Input id="project-path" placeholder="/srv/repos/my-app" value={path} onChange={(e) => setPath(e.target.value)} aria-invalid={!!errors.path} />
              {err("path")}
            </div>
          ) : (
            <GitHubRepositoryPicker
              value={github}
              onChange={(next) => {
                setGithub(next);
                // A new choice answers the repository errors of the last submit; the name's stays until it is fixed.
                setErrors(({ name: nameError }): Record<string, string> => (nameError ? { name: nameError } : {}));
              }}
              errors={errors}
            />
          )}
          {create.error && (
            <Alert variant="destructive" data-testid="create-project-error">
              <AlertTitle>Not created</AlertTitle>
              <AlertDescription>{create.error.message}</AlertDescription>
            </Alert>
          )}
        </CardContent>
        <CardFooter>
          <Button type="submit" disabled={create.isPending} data-testid="create-project-submit">
            Create project
          </Button>
        </CardFooter>
      </form>
    </Card>
  );
}

/** The project's default run config in words: one line per setting, or that runs start from the built-in defaults. */
function DefaultConfig({ config }: { config: Record<string, unknown> }) {
  const lines = settingLines(config);
  if (lines.length === 0) {
    return (
      <p className="text-muted-foreground text-sm" data-testid="default-config">
        None set: runs start from the built-in defaults (plan approved by a person, everything else automatic).
      </p>
    );
  }
  return (
    <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-0.5 text-sm" data-testid="default-config">
      {lines.map((l) => (
        <div key={l.key} className="contents">
          <dt className="text-muted-foreground font-mono text-xs leading-5">{l.key}</dt>
          <dd className="break-words">{l.value}</dd>
        </div>
      ))}
    </dl>
  );
}
