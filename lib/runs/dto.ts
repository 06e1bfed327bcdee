import type { RunState } from "@/lib/workflow";
import { runOutcome } from "./outcome";
import { runTitle } from "./title";

/** The API shape of a run (DESIGN.md §5): the projection minus internals, timestamps as ISO strings. */
export function toRunDto(run: RunState) {
  const iso = (n: number | null) => (n === null ? null : new Date(n).toISOString());
  return {
    id: run.id,
    projectId: run.projectId,
    userId: run.userId,
    status: run.status,
    currentStage: run.currentStage,
    /** A short title derived from the request (its first line), for lists and headings. */
    title: runTitle(run.originalRequest),
    originalRequest: run.originalRequest,
    config: run.config,
    branch: run.branch,
    createdAt: iso(run.createdAt),
    startedAt: iso(run.startedAt),
    pausedAt: iso(run.pausedAt),
    resumedAt: iso(run.resumedAt),
    completedAt: iso(run.completedAt),
    updatedAt: iso(run.updatedAt),
    clarificationCount: run.clarificationCount,
    pendingGate: run.pendingGate,
    pendingClarification: run.pendingClarification,
    pauseReason: run.pauseReason,
    planVersion: run.planVersion,
    pullRequest: run.pullRequest,
    merged: run.merged,
    lastValidation: run.lastValidation,
    /** "validated" or "accepted_failed_validation" once completed; never the same badge for both. */
    outcome: runOutcome(run),
    error: run.error,
    lastSequence: run.lastSequence,
  };
}

export type RunDto = ReturnType<typeof toRunDto>;
