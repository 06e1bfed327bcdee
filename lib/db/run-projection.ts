import type { workflowRuns } from "@/lib/db/schema";
import type { RunState, RunStatus } from "@/lib/workflow";

/*
 * A run's projection (RunState, what the reducer computes) and its workflow_runs row: the fields with columns of
 * their own, the rest in `state`. Used by the event store (./event-store.ts, which re-exports the two conversions).
 */

type RunRow = typeof workflowRuns.$inferSelect;

export const COLUMN_KEYS = [
  "id",
  "projectId",
  "userId",
  "config",
  "originalRequest",
  "createdAt",
  "status",
  "currentStage",
  "startedAt",
  "pausedAt",
  "resumedAt",
  "completedAt",
  "clarificationCount",
  "branch",
  "lastSequence",
  "updatedAt",
] as const;

type RestOfState = Omit<RunState, (typeof COLUMN_KEYS)[number]>;

const time = (d: Date | null) => (d ? d.getTime() : null);

export function rowToState(row: RunRow): RunState {
  const rest = row.state as unknown as RestOfState;
  return {
    ...rest,
    id: row.id,
    projectId: row.projectId,
    userId: row.userId,
    config: row.config,
    originalRequest: row.originalRequest,
    createdAt: row.createdAt.getTime(),
    status: row.status as RunStatus,
    currentStage: row.currentStage as RunState["currentStage"],
    startedAt: time(row.startedAt),
    pausedAt: time(row.pausedAt),
    resumedAt: time(row.resumedAt),
    completedAt: time(row.completedAt),
    clarificationCount: row.clarificationCount,
    branch: row.branch,
    lastSequence: row.lastSequence,
    updatedAt: row.updatedAt.getTime(),
  };
}

export function stateToRow(state: RunState): typeof workflowRuns.$inferInsert {
  const rest: Record<string, unknown> = { ...state };
  for (const key of COLUMN_KEYS) delete rest[key];
  const date = (n: number | null) => (n === null ? null : new Date(n));
  return {
    id: state.id,
    projectId: state.projectId,
    userId: state.userId,
    config: state.config,
    originalRequest: state.originalRequest,
    createdAt: new Date(state.createdAt),
    status: state.status,
    currentStage: state.currentStage,
    startedAt: date(state.startedAt),
    pausedAt: date(state.pausedAt),
    resumedAt: date(state.resumedAt),
    completedAt: date(state.completedAt),
    clarificationCount: state.clarificationCount,
    branch: state.branch,
    state: rest,
    lastSequence: state.lastSequence,
    updatedAt: new Date(state.updatedAt),
  };
}
