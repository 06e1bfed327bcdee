import type { GatehouseApi, Project } from "./api";

/*
 * "New run…" and "Explore N approaches…", as plain steps the host drives with its input boxes and quick picks (so they
 * are tested without VS Code): which project, what to do, how many approaches; then one call to POST /api/runs.
 */

export const MAX_APPROACHES = 5;

/** The input box's check of the approach count: null when fine, else what to fix. */
export function checkApproaches(value: string): string | null {
  const n = Number(value.trim());
  return Number.isInteger(n) && n >= 2 && n <= MAX_APPROACHES ? null : `Give a whole number from 2 to ${MAX_APPROACHES}.`;
}

export function checkRequest(value: string): string | null {
  return value.trim() ? null : "Say what the run should do; the request must not be empty.";
}

/** The quick pick's items for the projects, the one a command came from (a tree node) first. */
export function projectItems(projects: Project[], preferred?: string) {
  return [...projects]
    .sort((a, b) => Number(b.id === preferred) - Number(a.id === preferred))
    .map((project) => ({ label: project.name, description: project.id, project }));
}

/** Start it, and say what started (the message the host shows). */
export async function startRuns({ api, projectId, request, approaches }: { api: GatehouseApi; projectId: string; request: string; approaches?: number }) {
  const started = await api.startRun({ projectId, request: request.trim(), approaches });
  const runs = started.runs ?? [started.run];
  const message = approaches ? `started ${runs.length} approaches of “${started.run.title || request.trim()}”.` : `started run ${started.run.id}.`;
  return { runs, message };
}

/** The status bar's text and tooltip for the count of decisions that wait for you. */
export function waitingStatus(count: number | null): { text: string; tooltip: string } {
  if (count === null) return { text: "$(bell-slash) Gatehouse", tooltip: "Gatehouse: not connected (set the server and an API token)." };
  if (count === 0) return { text: "$(bell) 0", tooltip: "Gatehouse: no decision waits for you." };
  return { text: `$(bell-dot) ${count}`, tooltip: `Gatehouse: ${count} decision${count === 1 ? "" : "s"} wait${count === 1 ? "s" : ""} for you. Click to open one.` };
}
