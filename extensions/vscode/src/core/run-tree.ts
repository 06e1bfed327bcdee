import { errorMessage, type GatehouseApi, type Project, type Run } from "./api";

/*
 * The tree of projects and runs, as plain data: the VS Code TreeDataProvider (src/host/tree-provider.ts) only maps these
 * nodes onto TreeItems. Runs that have not ended are followed over their SSE stream, so a status change shows up as
 * soon as the server logs it; the list itself is re-read on refresh (and on a timer by the host), because the API has no
 * stream of new runs.
 */

export const WAITING_STATUSES = new Set(["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"]);
export const TERMINAL_STATUSES = new Set(["completed", "failed", "cancelled"]);

export type ProjectNode = { kind: "project"; id: string; label: string; description: string; runCount: number };
export type RunNode = {
  kind: "run";
  id: string;
  projectId: string;
  label: string;
  description: string;
  status: string;
  /** A codicon id for the status (the host turns it into a ThemeIcon). */
  icon: string;
  /** For `when` clauses of the menus: "run:awaiting_approval", "run:completed", … */
  contextValue: string;
  tooltip: string;
};
export type MessageNode = { kind: "message"; id: string; label: string };
export type TreeNode = ProjectNode | RunNode | MessageNode;

/** Why a run needs a person, in words, or null when it does not. */
export function needsYou(run: Run): string | null {
  switch (run.status) {
    case "awaiting_approval":
      return `the plan${run.planVersion ? ` v${run.planVersion}` : ""} waits for your approval`;
    case "awaiting_clarification":
      return "a question waits for your answer";
    case "awaiting_fix_decision":
      return "validation failed: retry, accept or cancel";
    case "paused":
      return `it is paused${run.pauseReason ? ` (${run.pauseReason})` : ""}`;
    default:
      return null;
  }
}

const ICONS: Record<string, string> = {
  queued: "clock",
  running: "sync~spin",
  awaiting_approval: "bell-dot",
  awaiting_clarification: "question",
  awaiting_fix_decision: "wrench",
  paused: "debug-pause",
  completed: "pass",
  failed: "error",
  cancelled: "circle-slash",
};

export function runNode(run: Run): RunNode {
  const status = run.status.replace(/_/g, " ");
  const stage = run.currentStage && !TERMINAL_STATUSES.has(run.status) ? ` · ${run.currentStage}` : "";
  const outcome = run.outcome === "accepted_failed_validation" ? " (accepted, validation failed)" : "";
  return {
    kind: "run",
    id: run.id,
    projectId: run.projectId,
    label: run.title || run.id,
    description: `${status}${stage}${outcome}`,
    status: run.status,
    icon: ICONS[run.status] ?? "circle-outline",
    contextValue: `run:${run.status}`,
    tooltip: [run.originalRequest, `${run.id} · ${status}`, needsYou(run) ? `Needs you: ${needsYou(run)}` : "", run.error ? `Error: ${run.error}` : ""]
      .filter(Boolean)
      .join("\n"),
  };
}

export class RunTreeModel {
  private projects: Project[] = [];
  private runs = new Map<string, Run>();
  private streams = new Map<string, AbortController>();
  private error: string | null = null;
  private listeners = new Set<() => void>();
  private disposed = false;

  constructor(
    private readonly options: {
      api: () => GatehouseApi | null;
      /** Called once each time a run starts waiting for a person (not for runs already waiting at the first load). */
      onNeedsYou?: (event: { run: Run; reason: string }) => void;
    },
  ) {}

  onDidChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed() {
    for (const listener of this.listeners) listener();
  }

  /** Re-read projects and runs, and follow every run that has not ended. */
  async refresh(): Promise<void> {
    const api = this.options.api();
    if (!api) {
      this.error = "Not connected: set gatehouse.serverUrl and run “Gatehouse: Set API Token”.";
      this.projects = [];
      this.setRuns([], { notify: false });
      this.changed();
      return;
    }
    try {
      const [projects, runs] = await Promise.all([api.projects(), api.runs()]);
      this.projects = projects;
      this.error = null;
      this.setRuns(runs, { notify: true });
    } catch (error) {
      this.error = errorMessage(error);
    }
    this.changed();
  }

  private first = true;

  private setRuns(runs: Run[], { notify }: { notify: boolean }) {
    const seen = new Set<string>();
    for (const run of runs) {
      seen.add(run.id);
      this.update(run, { notify: notify && !this.first });
    }
    for (const id of [...this.runs.keys()]) if (!seen.has(id)) this.runs.delete(id);
    for (const [id, controller] of this.streams) {
      if (!seen.has(id)) {
        controller.abort();
        this.streams.delete(id);
      }
    }
    if (notify) this.first = false;
    for (const run of this.runs.values()) if (!TERMINAL_STATUSES.has(run.status)) this.follow(run);
  }

  /** Take a newer copy of a run; tells onNeedsYou when it has just started to wait for a person. */
  private update(run: Run, { notify }: { notify: boolean }) {
    const before = this.runs.get(run.id);
    if (before && before.lastSequence > run.lastSequence) return;
    this.runs.set(run.id, run);
    const reason = needsYou(run);
    const newWait = reason && (!before || before.status !== run.status || before.pendingGate?.gateId !== run.pendingGate?.gateId);
    if (notify && newWait) this.options.onNeedsYou?.({ run, reason });
  }

  private follow(run: Run) {
    if (this.streams.has(run.id) || this.disposed) return;
    const api = this.options.api();
    if (!api) return;
    const controller = new AbortController();
    this.streams.set(run.id, controller);
    const id = run.id;
    void api
      .follow({
        id,
        after: run.lastSequence,
        signal: controller.signal,
        onEvent: async (event) => {
          const current = this.runs.get(id);
          if (current && current.lastSequence >= event.sequence) return;
          // The event says something happened; the run's projection says what it means (status, pending gate).
          const { run: next } = await api.run({ id });
          this.update(next, { notify: true });
          this.changed();
        },
      })
      .then(async () => {
        if (controller.signal.aborted) return;
        // The stream ended: the run is over. Read its final state once.
        if (this.streams.get(id) === controller) this.streams.delete(id);
        const { run: last } = await api.run({ id });
        this.update(last, { notify: true });
        this.changed();
      })
      .catch((error) => {
        if (controller.signal.aborted) return;
        this.error = `Lost the live updates of ${id}: ${errorMessage(error)}`;
        this.changed();
      })
      .finally(() => {
        if (this.streams.get(id) === controller) this.streams.delete(id);
      });
  }

  /** Runs followed live right now (for tests and the status bar). */
  followed(): string[] {
    return [...this.streams.keys()];
  }

  run(id: string): Run | undefined {
    return this.runs.get(id);
  }

  /** The runs that wait for a person, newest first. */
  waiting(): Run[] {
    return [...this.runs.values()].filter((r) => needsYou(r)).sort((a, b) => (b.updatedAt ?? "").localeCompare(a.updatedAt ?? ""));
  }

  children(parent?: TreeNode): TreeNode[] {
    if (!parent) {
      if (this.error) return [{ kind: "message", id: "error", label: this.error }];
      if (this.projects.length === 0) return [{ kind: "message", id: "empty", label: "No projects yet: create one in the dashboard." }];
      return this.projects.map((p) => {
        const runCount = [...this.runs.values()].filter((r) => r.projectId === p.id).length;
        const where = p.repository.type === "local" ? p.repository.path : `${p.repository.owner}/${p.repository.repo}`;
        return { kind: "project", id: p.id, label: p.name, description: `${runCount} run${runCount === 1 ? "" : "s"} · ${where}`, runCount };
      });
    }
    if (parent.kind !== "project") return [];
    return [...this.runs.values()]
      .filter((r) => r.projectId === parent.id)
      .sort((a, b) => (b.createdAt ?? "").localeCompare(a.createdAt ?? ""))
      .map(runNode);
  }

  dispose() {
    this.disposed = true;
    for (const controller of this.streams.values()) controller.abort();
    this.streams.clear();
    this.listeners.clear();
  }
}
