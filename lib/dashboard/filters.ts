import type { RunStatus } from "@/lib/workflow/types";

/** The runs list's quick filters, each a set of statuses the API filters by. */
export const RUN_FILTERS = {
  all: { label: "All", statuses: [] },
  waiting: {
    label: "Waiting on me",
    statuses: ["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"],
  },
  running: { label: "Running", statuses: ["queued", "running"] },
  done: { label: "Done", statuses: ["completed"] },
  failed: { label: "Failed", statuses: ["failed", "cancelled"] },
} as const satisfies Record<string, { label: string; statuses: readonly RunStatus[] }>;

export type RunFilter = keyof typeof RUN_FILTERS;
export const RUN_FILTER_KEYS = Object.keys(RUN_FILTERS) as RunFilter[];

export function isRunFilter(value: string | null | undefined): value is RunFilter {
  return !!value && Object.hasOwn(RUN_FILTERS, value);
}

export const WAITING_STATUS_LIST: readonly RunStatus[] = RUN_FILTERS.waiting.statuses;

/** The query string for GET /api/runs: only the parameters that are set. */
export function runsQuery({
  filter = "all",
  projectId,
  q,
  cursor,
  limit,
}: {
  filter?: RunFilter;
  projectId?: string | null;
  q?: string | null;
  cursor?: string | null;
  limit?: number;
}): string {
  const params = new URLSearchParams();
  const statuses = RUN_FILTERS[filter].statuses;
  if (statuses.length) params.set("status", statuses.join(","));
  if (projectId) params.set("projectId", projectId);
  if (q?.trim()) params.set("q", q.trim());
  if (cursor) params.set("cursor", cursor);
  if (limit) params.set("limit", String(limit));
  return params.toString();
}

/** Whether a run waits for a person (and so belongs in the inbox). */
export function needsPerson(status: string): boolean {
  return (WAITING_STATUS_LIST as readonly string[]).includes(status);
}

export function isTerminal(status: string): boolean {
  return status === "completed" || status === "failed" || status === "cancelled";
}
