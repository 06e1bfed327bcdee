import type { Stage } from "./config";
import type { PlanDocument } from "./events";

export type RunStatus =
  | "queued"
  | "running"
  | "awaiting_approval"
  | "awaiting_clarification"
  | "awaiting_fix_decision"
  | "paused"
  | "completed"
  | "failed"
  | "cancelled";

export const RUN_STATUSES: readonly RunStatus[] = [
  "queued",
  "running",
  "awaiting_approval",
  "awaiting_clarification",
  "awaiting_fix_decision",
  "paused",
  "completed",
  "failed",
  "cancelled",
];

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(["completed", "failed", "cancelled"]);
/** Statuses in which the run waits for a person. */
export const WAITING_STATUSES: ReadonlySet<RunStatus> = new Set([
  "awaiting_approval",
  "awaiting_clarification",
  "awaiting_fix_decision",
  "paused",
]);

export type GateKind = "plan" | "implementation" | "fix" | "escalation" | "budget" | "timeout" | "conflict" | "policy";

/** The run's projection: what workflow_runs stores, computed only by the reducer. */
export type RunState = {
  id: string;
  projectId: string;
  userId: string;
  config: Record<string, unknown>;
  originalRequest: string;
  createdAt: number;
  status: RunStatus;
  currentStage: Stage | null;
  startedAt: number | null;
  pausedAt: number | null;
  resumedAt: number | null;
  completedAt: number | null;
  clarificationCount: number;
  branch: string | null;
  pendingGate: { gateId: string; gateNumber: number; kind: GateKind } | null;
  pendingClarification: { clarificationId: string; stage: Stage } | null;
  pauseReason: { reason: string; message: string; stage: Stage | null; plan?: PlanDocument } | null;
  planVersion: number;
  /**
   * A re-plan under way during implementation (REPLAN_PROPOSED planning, until its planning stage completes): the run's
   * one re-plan at a time, and whose (a parallel task's id, or null for the run's own session).
   */
  replanning?: { taskId: string | null } | null;
  /**
   * The person the run waits for was asked by one of its parallel tasks, and the others compute on: the run still holds
   * its slot of the user's concurrency limit (lib/runs/steps/start.ts counts it as computing).
   */
  holdsSlot?: boolean;
  /** Re-plans drafted during implementation that count toward limits.maxReplans. */
  replans?: number;
  rejections: number;
  implementationAttempts: number;
  validationAttempts: number;
  lastValidation: "passed" | "failed" | null;
  pullRequest: { number: number; url: string; draft: boolean; state: "open" | "merged" | "closed" } | null;
  merged: boolean;
  error: string | null;
  lastSequence: number;
  updatedAt: number;
};
