"use client";

import { useRouter } from "next/navigation";
import { useMemo, useState } from "react";
import { useQueryClient } from "@tanstack/react-query";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { RadioGroup, RadioGroupItem } from "@/components/ui/radio-group";
import { Select, SelectContent, SelectItem, SelectTrigger, SelectValue } from "@/components/ui/select";
import { Switch } from "@/components/ui/switch";
import { Textarea } from "@/components/ui/textarea";
import { runConfigSchema } from "@/lib/workflow/config";
import type { ModelChoice } from "@/lib/dashboard/models";
import { apiSend, type Run } from "./api";

type ProjectOption = { id: string; name: string; defaultConfig: Record<string, unknown>; repositoryType: "local" | "github" };
type Routing = { planner: string; implementer: string; validator: string };
type Trust = "auto" | "manual";

const STAGE_TRUST = [
  { key: "planning", label: "Planning", help: "Manual: you approve the plan before code is written." },
  { key: "implementation", label: "Implementation", help: "Manual: you review the implementation before validation." },
  { key: "fixes", label: "Fixes", help: "Manual: you decide what happens when validation fails." },
] as const;
const ROLES = [
  { key: "planner", label: "Planner" },
  { key: "implementer", label: "Implementer" },
  { key: "validator", label: "Validator" },
] as const;
const TIMEOUTS = [
  { key: "planning", label: "Planning" },
  { key: "implementation", label: "Implementation" },
  { key: "validation", label: "Validation" },
] as const;

type FormState = {
  trustMode: Record<"planning" | "implementation" | "fixes", Trust>;
  maxClarifications: string;
  modelRouting: Routing;
  timeoutMinutes: Record<"planning" | "implementation" | "validation", string>;
  maxConcurrentTasks: string;
  createPR: boolean;
  autoMerge: boolean;
  baseBranch: string;
};

/** The form's starting values: the schema's defaults under the project's own defaults. */
function initialState(project: ProjectOption | undefined, defaults: Routing): FormState {
  const parsed = runConfigSchema.safeParse(project?.defaultConfig ?? {});
  const c = parsed.success ? parsed.data : runConfigSchema.parse({});
  return {
    trustMode: { ...c.trustMode },
    maxClarifications: String(c.maxClarifications),
    modelRouting: {
      planner: c.modelRouting.planner ?? defaults.planner,
      implementer: c.modelRouting.implementer ?? defaults.implementer,
      validator: c.modelRouting.validator ?? defaults.validator,
    },
    timeoutMinutes: {
      planning: String(c.timeoutMinutes.planning),
      implementation: String(c.timeoutMinutes.implementation),
      validation: String(c.timeoutMinutes.validation),
    },
    maxConcurrentTasks: String(c.limits.maxConcurrentTasks),
    createPR: c.git.createPR,
    autoMerge: c.git.autoMerge,
    baseBranch: c.git.baseBranch,
  };
}

const num = (v: string) => (v.trim() === "" ? Number.NaN : Number(v));

export function NewRunForm({
  projects,
  choices,
  defaults,
  initialProjectId,
}: {
  projects: ProjectOption[];
  choices: ModelChoice[];
  defaults: Routing;
  initialProjectId?: string;
}) {
  const router = useRouter();
  const queryClient = useQueryClient();
  const [projectId, setProjectId] = useState(initialProjectId && projects.some((p) => p.id === initialProjectId) ? initialProjectId : (projects[0]?.id ?? ""));
  const project = projects.find((p) => p.id === projectId);
  // A local repository has no pull requests: the switch is off and disabled, and the run is started without one.
  const isLocal = project?.repositoryType === "local";
  const [form, setForm] = useState<FormState>(() => initialState(project, defaults));
  const [request, setRequest] = useState("");
  const [approaches, setApproaches] = useState("1");
  const [variants, setVariants] = useState<string[]>([]);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [serverError, setServerError] = useState<string | null>(null);
  const [submitting, setSubmitting] = useState(false);

  const n = Math.trunc(num(approaches));
  const variantCount = Number.isInteger(n) && n >= 2 && n <= 5 ? n : 1;
  const choiceIds = useMemo(() => new Set(choices.map((c) => c.id)), [choices]);

  const chooseProject = (id: string) => {
    setProjectId(id);
    setForm(initialState(projects.find((p) => p.id === id), defaults));
  };

  const config = () => ({
    trustMode: form.trustMode,
    maxClarifications: num(form.maxClarifications),
    modelRouting: form.modelRouting,
    timeoutMinutes: {
      planning: num(form.timeoutMinutes.planning),
      implementation: num(form.timeoutMinutes.implementation),
      validation: num(form.timeoutMinutes.validation),
    },
    limits: { maxConcurrentTasks: num(form.maxConcurrentTasks) },
    git: { createPR: form.createPR && !isLocal, autoMerge: form.autoMerge, baseBranch: form.baseBranch },
  });

  const validate = (): Record<string, string> => {
    const out: Record<string, string> = {};
    if (!projectId) out.project = "Choose a project (create one on the Projects page first).";
    if (!request.trim()) out.request = "Describe what you want changed.";
    if (!(Number.isInteger(n) && n >= 1 && n <= 5)) out.approaches = "Enter a whole number from 1 to 5.";
    const parsed = runConfigSchema.safeParse(config());
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const key = issue.path.join(".");
        out[key] ??= issue.message.startsWith("Invalid input") ? "must be a number" : issue.message;
      }
    }
    return out;
  };

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    setServerError(null);
    const found = validate();
    setErrors(found);
    if (Object.keys(found).length) {
      const first = Object.keys(found)[0]!;
      document.getElementById(fieldId(first))?.focus();
      return;
    }
    setSubmitting(true);
    try {
      if (variantCount === 1) {
        const { run } = await apiSend<{ run: Run }>("/api/runs", { projectId, request: request.trim(), config: config() });
        await queryClient.invalidateQueries({ queryKey: ["runs"] });
        router.push(`/runs/${run.id}`);
        return;
      }
      // The approaches start together, in one request and one transaction, under one group id; every approach says
      // which one it is (and its note), so a planner — the demo model too — can take a different route for each.
      const { groupId } = await apiSend<{ groupId: string; runs: Run[] }>("/api/runs", {
        projectId,
        request: request.trim(),
        config: config(),
        approaches: variantCount,
        approachNotes: Array.from({ length: variantCount }, (_, i) => variants[i]?.trim() ?? ""),
      });
      await queryClient.invalidateQueries({ queryKey: ["runs"] });
      // The group's own address (as the README documents it), so the comparison can be found again from any run of it.
      router.push(`/compare?group=${groupId}`);
    } catch (error) {
      setServerError(error instanceof Error ? error.message : String(error));
      setSubmitting(false);
    }
  };

  const err = (key: string) =>
    errors[key] ? (
      <p id={`${fieldId(key)}-error`} className="text-destructive text-xs" data-testid={`error-${key}`}>
        {errors[key]}
      </p>
    ) : null;
  const invalid = (key: string) => (errors[key] ? { "aria-invalid": true, "aria-describedby": `${fieldId(key)}-error` } : {});

  return (
    <form onSubmit={submit} noValidate className="grid gap-6 lg:grid-cols-[1fr_22rem]" data-testid="new-run-form">
      <div className="space-y-6">
        {serverError && (
          <Alert variant="destructive" data-testid="new-run-error">
            <AlertTitle>The run was not started</AlertTitle>
            <AlertDescription>{serverError}</AlertDescription>
          </Alert>
        )}
        <Card>
          <CardHeader>
            <CardTitle>What should change?</CardTitle>
            <CardDescription>Gatehouse plans it, waits at the gates you choose, implements, validates and delivers a branch.</CardDescription>
          </CardHeader>
          <CardContent className="space-y-4">
            <div className="grid gap-2">
              <Label htmlFor={fieldId("project")}>Project</Label>
              {projects.length === 0 ? (
                <p className="text-muted-foreground text-sm">
                  No projects yet. <a className="underline" href="/projects">Create a project</a> to bind a repository first.
                </p>
              ) : (
                <Select value={projectId} onValueChange={chooseProject}>
                  <SelectTrigger id={fieldId("project")} className="w-full" {...invalid("project")}>
                    <SelectValue placeholder="Choose a project" />
                  </SelectTrigger>
                  <SelectContent>
                    {projects.map((p) => (
                      <SelectItem key={p.id} value={p.id}>
                        {p.name}
                      </SelectItem>
                    ))}
                  </SelectContent>
                </Select>
              )}
              {err("project")}
            </div>
            <div className="grid gap-2">
              <Label htmlFor={fieldId("request")}>Request</Label>
              <Textarea
                id={fieldId("request")}
                rows={7}
                value={request}
                onChange={(e) => setRequest(e.target.value)}
                placeholder="e.g. Add a /health endpoint that reports database connectivity, with a test."
                {...invalid("request")}
              />
              {err("request")}
            </div>
          </CardContent>
        </Card>

        <Card>
          <CardHeader>
            <CardTitle>Explore approaches</CardTitle>
            <CardDescription>Start several runs of the same request together and compare their plans, diffs, validation and cost.</CardDescription>
          </CardHeader>
          <CardContent className="space-y-4">
            <div className="grid max-w-56 gap-2">
              <Label htmlFor={fieldId("approaches")}>Number of approaches</Label>
              <Input id={fieldId("approaches")} type="number" min={1} max={5} value={approaches} onChange={(e) => setApproaches(e.target.value)} {...invalid("approaches")} />
              {err("approaches")}
            </div>
            {variantCount > 1 &&
              Array.from({ length: variantCount }, (_, i) => (
                <div key={i} className="grid gap-2">
                  <Label htmlFor={`variant-${i}`}>Approach {i + 1} hint (optional)</Label>
                  <Input
                    id={`variant-${i}`}
                    value={variants[i] ?? ""}
                    placeholder={i === 0 ? "e.g. keep it minimal" : "e.g. use a library"}
                    onChange={(e) => setVariants((v) => Object.assign([...v], { [i]: e.target.value }))}
                  />
                </div>
              ))}
          </CardContent>
        </Card>
      </div>

      <div className="space-y-6">
        <Card>
          <CardHeader>
            <CardTitle>Gates</CardTitle>
            <CardDescription>Where a person decides (manual) or the run goes on by itself (auto).</CardDescription>
          </CardHeader>
          <CardContent className="space-y-4">
            {STAGE_TRUST.map(({ key, label, help }) => (
              <fieldset key={key} className="grid gap-2">
                <legend className="text-sm font-medium">{label}</legend>
                <RadioGroup
                  className="flex gap-4"
                  value={form.trustMode[key]}
                  onValueChange={(v) => setForm((f) => ({ ...f, trustMode: { ...f.trustMode, [key]: v as Trust } }))}
                  aria-label={`${label} trust mode`}
                >
                  {(["manual", "auto"] as const).map((mode) => (
                    <div key={mode} className="flex items-center gap-2">
                      <RadioGroupItem value={mode} id={`trust-${key}-${mode}`} />
                      <Label htmlFor={`trust-${key}-${mode}`} className="font-normal">
                        {mode}
                      </Label>
                    </div>
                  ))}
                </RadioGroup>
                <p className="text-muted-foreground text-xs">{help}</p>
              </fieldset>
            ))}
            <div className="grid gap-2">
              <Label htmlFor={fieldId("maxClarifications")}>Max clarifications</Label>
              <Input
                id={fieldId("maxClarifications")}
                type="number"
                min={0}
                max={20}
                value={form.maxClarifications}
                onChange={(e) => setForm((f) => ({ ...f, maxClarifications: e.target.value }))}
                {...invalid("maxClarifications")}
              />
              {err("maxClarifications")}
            </div>
          </CardContent>
        </Card>

        <Card>
          <CardHeader>
            <CardTitle>Models and time limits</CardTitle>
            <CardDescription>Only configured providers are offered; the demo model is scripted, not intelligent.</CardDescription>
          </CardHeader>
          <CardContent className="space-y-4">
            {ROLES.map(({ key, label }) => {
              const value = form.modelRouting[key];
              return (
                <div key={key} className="grid gap-2">
                  <Label htmlFor={fieldId(`modelRouting.${key}`)}>{label} model</Label>
                  <Select value={value} onValueChange={(v) => setForm((f) => ({ ...f, modelRouting: { ...f.modelRouting, [key]: v } }))}>
                    <SelectTrigger id={fieldId(`modelRouting.${key}`)} className="w-full" {...invalid(`modelRouting.${key}`)}>
                      <SelectValue />
                    </SelectTrigger>
                    <SelectContent>
                      {!choiceIds.has(value) && <SelectItem value={value}>{value} (project default)</SelectItem>}
                      {choices.map((c) => (
                        <SelectItem key={c.id} value={c.id}>
                          {c.label}
                        </SelectItem>
                      ))}
                    </SelectContent>
                  </Select>
                  {err(`modelRouting.${key}`)}
                </div>
              );
            })}
            <fieldset className="grid grid-cols-3 items-end gap-2" data-testid="time-limits">
              <legend className="mb-2 text-sm font-medium">Time limits (minutes)</legend>
              {TIMEOUTS.map(({ key, label }) => (
                <div key={key} className="grid min-w-0 gap-1.5">
                  <Label htmlFor={fieldId(`timeoutMinutes.${key}`)} className="text-muted-foreground text-xs font-normal whitespace-nowrap" title={`${label} time limit, in minutes`}>
                    {label}
                  </Label>
                  <Input
                    id={fieldId(`timeoutMinutes.${key}`)}
                    type="number"
                    min={1}
                    value={form.timeoutMinutes[key]}
                    onChange={(e) => setForm((f) => ({ ...f, timeoutMinutes: { ...f.timeoutMinutes, [key]: e.target.value } }))}
                    {...invalid(`timeoutMinutes.${key}`)}
                  />
                </div>
              ))}
            </fieldset>
            {TIMEOUTS.map(({ key }) => err(`timeoutMinutes.${key}`))}
            <div className="grid gap-2">
              <Label htmlFor={fieldId("limits.maxConcurrentTasks")}>Tasks at the same time</Label>
              <Input
                id={fieldId("limits.maxConcurrentTasks")}
                type="number"
                min={1}
                max={10}
                value={form.maxConcurrentTasks}
                onChange={(e) => setForm((f) => ({ ...f, maxConcurrentTasks: e.target.value }))}
                aria-describedby="limits-maxConcurrentTasks-help"
                {...invalid("limits.maxConcurrentTasks")}
              />
              <p id="limits-maxConcurrentTasks-help" className="text-muted-foreground text-xs">
                Plan tasks whose dependencies are done run in parallel, each on its own branch and sandbox (1–10; 1 = one after another).
              </p>
              {err("limits.maxConcurrentTasks")}
            </div>
          </CardContent>
        </Card>

        <Card>
          <CardHeader>
            <CardTitle>Delivery</CardTitle>
          </CardHeader>
          <CardContent className="space-y-4">
            <div className="flex items-center justify-between gap-2">
              <Label htmlFor="git-createPR" className={isLocal ? "text-muted-foreground" : undefined}>
                Open a pull request
              </Label>
              <Switch
                id="git-createPR"
                checked={form.createPR && !isLocal}
                disabled={isLocal}
                onCheckedChange={(v) => setForm((f) => ({ ...f, createPR: v }))}
                aria-describedby={isLocal ? "git-createPR-help" : undefined}
              />
            </div>
            {isLocal && project && (
              <p id="git-createPR-help" className="text-muted-foreground -mt-2 text-xs" data-testid="create-pr-help">
                {project.name} is a local repository: there is no pull request to open. The work stays on the run&apos;s branch
                {form.autoMerge ? " and is squash-merged into the base branch when validation passes." : " for you to merge (the finished run shows the command)."}
              </p>
            )}
            <div className="flex items-center justify-between gap-2">
              <Label htmlFor="git-autoMerge">Merge automatically when validation passes</Label>
              <Switch id="git-autoMerge" checked={form.autoMerge} onCheckedChange={(v) => setForm((f) => ({ ...f, autoMerge: v }))} />
            </div>
            <div className="grid gap-2">
              <Label htmlFor={fieldId("git.baseBranch")}>Base branch</Label>
              <Input id={fieldId("git.baseBranch")} value={form.baseBranch} onChange={(e) => setForm((f) => ({ ...f, baseBranch: e.target.value }))} {...invalid("git.baseBranch")} />
              {err("git.baseBranch")}
            </div>
          </CardContent>
        </Card>

        <Button type="submit" className="w-full" disabled={submitting || projects.length === 0} data-testid="start-run">
          {submitting ? "Starting…" : variantCount > 1 ? `Start ${variantCount} runs` : "Start run"}
        </Button>
      </div>
    </form>
  );
}

function fieldId(key: string) {
  return `field-${key.replaceAll(".", "-")}`;
}
