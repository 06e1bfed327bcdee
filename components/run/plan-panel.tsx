"use client";

import { useMemo, useState } from "react";
import { Badge } from "@/components/ui/badge";
import { Label } from "@/components/ui/label";
import { Select, SelectContent, SelectItem, SelectTrigger, SelectValue } from "@/components/ui/select";
import { DiffView } from "@/components/runs/diff-view";
import { hasChanges, planDiff } from "@/lib/dashboard/plan-diff";
import type { PlanVersion, TaskTriage } from "@/lib/dashboard/timeline";
import type { PlanDocument } from "@/lib/workflow/events";
import type { TaskStatus } from "@/lib/mermaid/plan-diagram";
import type { TaskBranch } from "@/lib/workflow/task-status";
import type { RunCost } from "@/lib/runs/costs";
import { formatTokens, formatUsd } from "@/lib/dashboard/format";
import { MermaidDiagram } from "./mermaid-diagram";
import { PlanDiagramDiff, StatusDiagram } from "./plan-diagrams";

/**
 * A plan: its diagram (SVG), summary, tasks with dependencies and triage's verdict, tasks a tasks.md had already checked,
 * acceptance criteria and risks.
 */
export function PlanView({
  plan,
  triage = {},
  statuses,
  branches = {},
  costs = {},
}: {
  plan: PlanDocument;
  triage?: Record<string, TaskTriage>;
  /** Parallel tasks' own branches (TASK_BRANCH_CREATED / TASK_MERGED / TASK_MERGE_CONFLICT). */
  branches?: Record<string, TaskBranch>;
  /** Parallel tasks' own model cost (their sessions' calls). */
  costs?: Record<string, RunCost>;
  /** Each task's status in the run: when given, the diagram is coloured by it (live). */
  statuses?: Record<string, TaskStatus>;
}) {
  return (
    <div className="space-y-4" data-testid="plan">
      {plan.summary && <p className="text-sm">{plan.summary}</p>}
      <div className="bg-background rounded-md border p-3">
        {statuses ? <StatusDiagram plan={plan} statuses={statuses} /> : <MermaidDiagram source={plan.mermaid} />}
      </div>
      <div>
        <h3 className="mb-2 text-sm font-semibold">Tasks</h3>
        <ol className="space-y-2" data-testid="plan-tasks">
          {plan.tasks.map((task, i) => (
            <li key={task.id} className="rounded-md border p-2.5">
              <div className="flex flex-wrap items-center gap-2">
                <span className="text-muted-foreground font-mono text-xs">{i + 1}.</span>
                <span className="text-sm font-medium">{task.title}</span>
                <Badge variant="outline" className="font-mono">
                  {task.id}
                </Badge>
                {task.dependsOn?.length ? <span className="text-muted-foreground text-xs">after {task.dependsOn.join(", ")}</span> : null}
                {statuses?.[task.id] && (
                  <Badge variant="secondary" data-testid={`task-status-${task.id}`}>
                    {statuses[task.id]}
                  </Badge>
                )}
              </div>
              {branches[task.id] && (
                <p className="text-muted-foreground mt-1 font-mono text-xs" data-testid={`task-branch-${task.id}`}>
                  {branches[task.id]!.branch} · {branches[task.id]!.state}
                  {branches[task.id]!.run > 1 ? ` (run ${branches[task.id]!.run})` : ""}
                  {costs[task.id] && (
                    <span data-testid={`task-cost-${task.id}`}>
                      {" "}
                      · {formatUsd(costs[task.id]!.usd)} · {costs[task.id]!.calls} call{costs[task.id]!.calls === 1 ? "" : "s"} ·{" "}
                      {formatTokens(costs[task.id]!.tokensIn + costs[task.id]!.tokensOut)} tokens
                    </span>
                  )}
                </p>
              )}
              {task.description && <p className="text-muted-foreground mt-1 text-xs whitespace-pre-wrap">{task.description}</p>}
              {task.files?.length ? <p className="text-muted-foreground mt-1 font-mono text-xs">{task.files.join(" · ")}</p> : null}
              {triage[task.id] && (
                <div className="mt-1.5 text-xs" data-testid={`triage-${task.id}`}>
                  <Badge variant={triage[task.id]!.skipped ? "secondary" : "outline"}>
                    {triage[task.id]!.skipped ? "Already done — skipped" : "May be done — implemented anyway"} · confidence{" "}
                    {Math.round(triage[task.id]!.confidence * 100)}%
                  </Badge>
                  <ul className="text-muted-foreground mt-1 list-disc pl-5">
                    {triage[task.id]!.evidence.map((line, j) => (
                      <li key={j}>{line}</li>
                    ))}
                  </ul>
                </div>
              )}
            </li>
          ))}
        </ol>
      </div>
      {plan.skipped?.length ? (
        <div data-testid="plan-skipped">
          <h3 className="mb-2 text-sm font-semibold">Already checked in {plan.tasksFile?.path ?? "tasks.md"} (skipped)</h3>
          <ul className="text-muted-foreground list-disc space-y-1 pl-5 text-sm">
            {plan.skipped.map((t) => (
              <li key={t.id}>
                <span className="font-mono text-xs">{t.id}</span> {t.title}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {plan.acceptanceCriteria.length > 0 && (
        <div>
          <h3 className="mb-2 text-sm font-semibold">Acceptance criteria</h3>
          <ul className="list-disc space-y-1 pl-5 text-sm">
            {plan.acceptanceCriteria.map((c, i) => (
              <li key={c.id ?? i}>
                {c.description}
                {c.command && <code className="bg-muted ml-1 rounded px-1 text-xs">{c.command}</code>}
              </li>
            ))}
          </ul>
        </div>
      )}
      {plan.risks?.length ? (
        <div>
          <h3 className="mb-2 text-sm font-semibold">Risks</h3>
          <ul className="list-disc space-y-1 pl-5 text-sm">
            {plan.risks.map((r, i) => (
              <li key={i}>{r}</li>
            ))}
          </ul>
        </div>
      ) : null}
    </div>
  );
}

/** Every plan version, the selected one shown, and a diff between any two. */
export function PlanPanel({
  versions,
  fallback = null,
  people = {},
  triage = {},
  statuses,
  branches,
  costs,
  emptyText = "No plan yet: the planner is reading the request and the repository.",
}: {
  versions: PlanVersion[];
  /** Each task's status in the run (TASK_* events): the diagram is coloured by it. */
  statuses?: Record<string, TaskStatus>;
  /** Triage's verdict per task (TASK_TRIAGED events). */
  triage?: Record<string, TaskTriage>;
  branches?: Record<string, TaskBranch>;
  /** Parallel tasks' own model cost. */
  costs?: Record<string, RunCost>;
  /** The plan to show while the event log (which holds every version) is still loading. */
  fallback?: PlanDocument | null;
  people?: Record<string, string>;
  emptyText?: string;
}) {
  const latest = versions.at(-1);
  const [selected, setSelected] = useState<number | null>(null);
  const [compareFrom, setCompareFrom] = useState<number | null>(null);
  const shown = versions.find((v) => v.version === selected) ?? latest;
  const fromVersion = versions.find((v) => v.version === compareFrom) ?? versions.at(-2);
  const diff = useMemo(
    () =>
      fromVersion && shown && fromVersion.version !== shown.version
        ? planDiff({ from: fromVersion.plan, to: shown.plan, fromVersion: fromVersion.version, toVersion: shown.version })
        : null,
    [fromVersion, shown],
  );
  if (!shown) {
    if (fallback) return <PlanView plan={fallback} />;
    return <p className="text-muted-foreground text-sm" data-testid="plan-empty">{emptyText}</p>;
  }
  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-end gap-3">
        <div className="grid gap-1.5">
          <Label htmlFor="plan-version">Version</Label>
          <Select value={String(shown.version)} onValueChange={(v) => setSelected(Number(v))}>
            <SelectTrigger id="plan-version" className="w-56" data-testid="plan-version">
              <SelectValue />
            </SelectTrigger>
            <SelectContent>
              {versions.map((v) => (
                <SelectItem key={v.version} value={String(v.version)}>
                  v{v.version} · {v.source === "edit" ? `edited${v.by ? ` by ${people[v.by] ?? v.by}` : ""}` : "planner"}
                </SelectItem>
              ))}
            </SelectContent>
          </Select>
        </div>
        <p className="text-muted-foreground text-xs" data-testid="plan-version-count">
          {versions.length} version{versions.length === 1 ? "" : "s"}
        </p>
      </div>
      {shown.feedback && (
        <p className="bg-muted rounded-md p-2 text-xs">
          Re-planned after feedback: <span className="italic">{shown.feedback}</span>
        </p>
      )}
      <PlanView plan={shown.plan} triage={triage} statuses={statuses} branches={branches} costs={costs} />
      {versions.length > 1 && (
        <section className="space-y-2" aria-labelledby="plan-diff-heading">
          <div className="flex flex-wrap items-end gap-3">
            <h3 id="plan-diff-heading" className="text-sm font-semibold">
              Changes
            </h3>
            <div className="grid gap-1.5">
              <Label htmlFor="plan-diff-from" className="text-xs">
                Compare v{shown.version} with
              </Label>
              <Select value={fromVersion ? String(fromVersion.version) : undefined} onValueChange={(v) => setCompareFrom(Number(v))}>
                <SelectTrigger id="plan-diff-from" size="sm" className="w-32">
                  <SelectValue placeholder="version" />
                </SelectTrigger>
                <SelectContent>
                  {versions
                    .filter((v) => v.version !== shown.version)
                    .map((v) => (
                      <SelectItem key={v.version} value={String(v.version)}>
                        v{v.version}
                      </SelectItem>
                    ))}
                </SelectContent>
              </Select>
            </div>
          </div>
          {diff && fromVersion && fromVersion.version !== shown.version && (
            <PlanDiagramDiff from={fromVersion.plan} to={shown.plan} fromVersion={fromVersion.version} toVersion={shown.version} />
          )}
          {diff && hasChanges(diff) ? (
            <DiffView diff={diff} testId="plan-diff" />
          ) : (
            <p className="text-muted-foreground text-sm">{diff ? "No differences between these versions." : "Choose another version to compare."}</p>
          )}
        </section>
      )}
    </div>
  );
}
