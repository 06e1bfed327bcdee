"use client";

import { useEffect, useState } from "react";
import { Textarea } from "@/components/ui/textarea";
import { Label } from "@/components/ui/label";
import { Input } from "@/components/ui/input";
import { Button } from "@/components/ui/button";
import { ApiRequestError, apiSend } from "@/components/runs/api";
import { MermaidDiagram } from "./mermaid-diagram";

export type Validity = { state: "checking" } | { state: "valid"; kind: string } | { state: "invalid"; message: string; line: number | null };

/** Edit a plan's Mermaid source with a live preview and the server's own grammar check (debounced). */
export function PlanEditor({ value, onChange, onValidity }: { value: string; onChange: (v: string) => void; onValidity: (v: Validity) => void }) {
  const [preview, setPreview] = useState(value);
  const [validity, setValidity] = useState<Validity>({ state: "checking" });

  useEffect(() => {
    setValidity({ state: "checking" });
    onValidity({ state: "checking" });
    let cancelled = false;
    const timer = setTimeout(async () => {
      let next: Validity;
      try {
        const r = await apiSend<{ valid: boolean; kind?: string; error?: { message: string; line: number | null } }>("/api/mermaid/validate", { source: value });
        next = r.valid ? { state: "valid", kind: r.kind ?? "diagram" } : { state: "invalid", message: r.error?.message ?? "Invalid Mermaid.", line: r.error?.line ?? null };
      } catch (error) {
        // A 422 is the server's verdict on the diagram (too complex to parse), not a failure to ask it.
        const verdict = error instanceof ApiRequestError && error.status === 422;
        const said = error instanceof Error ? error.message : String(error);
        next = { state: "invalid", message: verdict ? said : `Could not check the diagram: ${said}`, line: null };
      }
      if (cancelled) return;
      setValidity(next);
      onValidity(next);
      if (next.state === "valid") setPreview(value);
    }, 400);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
    // onValidity is a setter from the parent; re-checking only when the source changes.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [value]);

  return (
    <div className="grid gap-4 lg:grid-cols-2" data-testid="plan-editor">
      <div className="grid content-start gap-2">
        <Label htmlFor="plan-mermaid">Mermaid source</Label>
        <Textarea
          id="plan-mermaid"
          value={value}
          onChange={(e) => onChange(e.target.value)}
          rows={16}
          spellCheck={false}
          className="font-mono text-xs"
          aria-invalid={validity.state === "invalid"}
          aria-describedby="plan-mermaid-status"
        />
        <p id="plan-mermaid-status" role="status" className="text-xs" data-testid="mermaid-validity" data-state={validity.state}>
          {validity.state === "checking" && <span className="text-muted-foreground">Checking…</span>}
          {validity.state === "valid" && <span className="text-emerald-600 dark:text-emerald-400">Valid {validity.kind}.</span>}
          {validity.state === "invalid" && <span className="text-destructive">{validity.message}</span>}
        </p>
      </div>
      <div className="grid content-start gap-2">
        <span className="text-sm font-medium">Preview{validity.state === "invalid" ? " (last valid version)" : ""}</span>
        <div className="bg-background rounded-md border p-3">
          <MermaidDiagram source={preview} label="Edited plan preview" />
        </div>
      </div>
    </div>
  );
}

/** `checks` (the task's own acceptance commands) are not edited here, but kept: an edit must not drop them. */
export type EditableTask = { id: string; title: string; description?: string; files?: string[]; dependsOn?: string[]; checks?: string[] };
export type EditableCriterion = { id?: string; description: string; command?: string };

function TaskField({ id, label, children }: { id: string; label: string; children: React.ReactNode }) {
  return (
    <div className="grid gap-1">
      <Label htmlFor={id} className="text-muted-foreground text-xs font-normal">
        {label}
      </Label>
      {children}
    </div>
  );
}

/** "a, b , c" ↔ ["a", "b", "c"]: files and dependencies are edited as comma-separated lists. */
const toList = (text: string) => text.split(",").map((s) => s.trim()).filter(Boolean);

/**
 * The plan's tasks (title, files = the scope validation holds the change to, dependencies) and acceptance criteria
 * (with the command that proves each). The server checks them (unique ids, known dependencies, no cycle, paths inside
 * the repository) and answers 400 naming the field.
 */
export function PlanFieldsEditor({
  tasks,
  criteria,
  onTasks,
  onCriteria,
}: {
  tasks: EditableTask[];
  criteria: EditableCriterion[];
  onTasks: (tasks: EditableTask[]) => void;
  onCriteria: (criteria: EditableCriterion[]) => void;
}) {
  const setTask = (i: number, patch: Partial<EditableTask>) => onTasks(tasks.map((t, j) => (j === i ? { ...t, ...patch } : t)));
  const setCriterion = (i: number, patch: Partial<EditableCriterion>) => onCriteria(criteria.map((c, j) => (j === i ? { ...c, ...patch } : c)));
  const nextTaskId = () => {
    for (let n = tasks.length + 1; ; n++) if (!tasks.some((t) => t.id === `T${n}`)) return `T${n}`;
  };
  return (
    <div className="grid gap-6" data-testid="plan-fields-editor">
      <fieldset className="grid gap-3">
        <legend className="text-sm font-medium">Tasks (files are the scope: changes outside them fail validation)</legend>
        {tasks.map((task, i) => (
          // Keyed by id and place: the comma-separated inputs are uncontrolled (typing "a, " must not be re-joined), so a
          // removal remounts the rows that moved with their own values.
          <div key={`${task.id}-${i}`} className="grid gap-2 rounded-md border p-2 sm:grid-cols-[4rem_1fr]" data-testid="edit-task">
            <span className="font-mono text-xs leading-9">{task.id}</span>
            {/* Each field keeps a visible label once filled (a placeholder alone disappears with the first letter). */}
            <div className="grid gap-2">
              <TaskField id={`task-${i}-title`} label="Title">
                <Input id={`task-${i}-title`} aria-label={`Task ${task.id} title`} value={task.title} onChange={(e) => setTask(i, { title: e.target.value })} />
              </TaskField>
              <TaskField id={`task-${i}-description`} label="Description (what to do, for the implementer)">
                <Textarea
                  id={`task-${i}-description`}
                  aria-label={`Task ${task.id} description`}
                  rows={2}
                  value={task.description ?? ""}
                  onChange={(e) => setTask(i, { description: e.target.value || undefined })}
                />
              </TaskField>
              <TaskField id={`task-${i}-files`} label="Files (the scope), comma-separated">
                <Input
                  id={`task-${i}-files`}
                  aria-label={`Task ${task.id} files`}
                  placeholder="e.g. src/app.ts, docs/"
                  className="font-mono text-xs"
                  defaultValue={(task.files ?? []).join(", ")}
                  onChange={(e) => setTask(i, { files: toList(e.target.value) })}
                />
              </TaskField>
              <TaskField id={`task-${i}-depends`} label="Depends on (task ids), comma-separated">
                <Input
                  id={`task-${i}-depends`}
                  aria-label={`Task ${task.id} depends on`}
                  placeholder="e.g. T1"
                  className="font-mono text-xs"
                  defaultValue={(task.dependsOn ?? []).join(", ")}
                  onChange={(e) => setTask(i, { dependsOn: toList(e.target.value) })}
                />
              </TaskField>
              <div>
                <Button type="button" variant="ghost" size="sm" onClick={() => onTasks(tasks.filter((_, j) => j !== i))} disabled={tasks.length <= 1}>
                  Remove task
                </Button>
              </div>
            </div>
          </div>
        ))}
        <div>
          <Button type="button" variant="outline" size="sm" data-testid="add-task" onClick={() => onTasks([...tasks, { id: nextTaskId(), title: "", files: [], dependsOn: [] }])}>
            Add task
          </Button>
        </div>
      </fieldset>
      <fieldset className="grid gap-3">
        <legend className="text-sm font-medium">Acceptance criteria (a command proves one when it exits 0)</legend>
        {criteria.map((c, i) => (
          <div key={i} className="grid gap-2 rounded-md border p-2" data-testid="edit-criterion">
            <Input aria-label={`Criterion ${i + 1} description`} value={c.description} onChange={(e) => setCriterion(i, { description: e.target.value })} />
            <Input
              aria-label={`Criterion ${i + 1} command`}
              placeholder="Command (optional), e.g. npm test"
              className="font-mono text-xs"
              value={c.command ?? ""}
              onChange={(e) => setCriterion(i, { command: e.target.value || undefined })}
            />
            <div>
              <Button type="button" variant="ghost" size="sm" onClick={() => onCriteria(criteria.filter((_, j) => j !== i))} disabled={criteria.length <= 1}>
                Remove criterion
              </Button>
            </div>
          </div>
        ))}
        <div>
          <Button type="button" variant="outline" size="sm" data-testid="add-criterion" onClick={() => onCriteria([...criteria, { description: "", command: undefined }])}>
            Add criterion
          </Button>
        </div>
      </fieldset>
    </div>
  );
}

/** The edited plan as POST /approve and POST /resume take it (empty optional fields left out). */
export function editedPlanBody({ mermaid, tasks, criteria, summary }: { mermaid: string; tasks: EditableTask[]; criteria: EditableCriterion[]; summary?: string }) {
  return {
    mermaid,
    ...(summary ? { summary } : {}),
    tasks: tasks.map((t) => ({
      id: t.id,
      title: t.title,
      ...(t.description ? { description: t.description } : {}),
      ...(t.files?.length ? { files: t.files } : {}),
      ...(t.dependsOn?.length ? { dependsOn: t.dependsOn } : {}),
      ...(t.checks?.length ? { checks: t.checks } : {}),
    })),
    // None at all (a draft without criteria) keeps the drafted ones rather than asking for an empty list.
    ...(criteria.length
      ? { acceptanceCriteria: criteria.map((c) => ({ ...(c.id ? { id: c.id } : {}), description: c.description, ...(c.command?.trim() ? { command: c.command.trim() } : {}) })) }
      : {}),
  };
}
