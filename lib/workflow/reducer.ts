import type { RunEvent } from "./events";
import { TERMINAL_STATUSES, type RunState, type RunStatus } from "./types";

/**
 * Whether parallel task `taskId` (null: the run's own session) may open a wait for a person (a gate, a question, a
 * pause) in this state: a run waits for one person at a time, so only while it runs with no gate or question open, and
 * no other task's re-plan under way (a re-plan holds that one wait from its proposal to its gate's decision).
 */
export function mayOpenWait(state: RunState, taskId: string | null): boolean {
  if (state.replanning && state.replanning.taskId !== taskId) return false;
  return state.status === "running" && !state.pendingGate && !state.pendingClarification;
}

/**
 * In the transaction that opens a parallel task's wait for a person: refused (nothing written) unless `mayOpenWait`.
 * The task looked before (openWhenFree), but another task's re-plan or wait may have been written since; the refusal
 * is an IllegalTransitionError, which the task reads as "busy" (it looks again once the wait under way ends: see
 * untilWaitCloses in inngest/run/waits.ts).
 */
export function refuseUnlessMayOpenWait(state: RunState, taskId: string, eventType: string) {
  if (!mayOpenWait(state, taskId)) throw new IllegalTransitionError(eventType, state.status, "the run waits for a person, or another task's re-plan is under way");
}

/** An event that is illegal in the run's current state. */
export class IllegalTransitionError extends Error {
  constructor(
    public readonly eventType: string,
    public readonly status: RunStatus | "none",
    reason: string,
  ) {
    super(`${eventType} is not allowed while the run is ${status}: ${reason}`);
    this.name = "IllegalTransitionError";
  }
}

type Meta = { runId: string; sequence: number };

/** The statuses of a wait a parallel task opened (a gate, a question), in which the run keeps its slot. */
const WAITS_HOLDING_SLOT: ReadonlySet<RunStatus> = new Set(["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision"]);

/**
 * The run's state machine. Pure: the next state from the current one and an event, or IllegalTransitionError.
 * `state` is null before RUN_CREATED.
 */
export function apply(state: RunState | null, event: RunEvent, meta: Meta): RunState {
  const at = event.timestamp;
  if (event.type === "RUN_CREATED") {
    if (state) throw new IllegalTransitionError(event.type, state.status, "the run already exists");
    const p = event.payload;
    return {
      id: meta.runId,
      projectId: p.projectId,
      userId: p.userId,
      config: p.config,
      originalRequest: p.request,
      createdAt: at,
      status: "queued",
      currentStage: null,
      startedAt: null,
      pausedAt: null,
      resumedAt: null,
      completedAt: null,
      clarificationCount: 0,
      branch: p.branch ?? null,
      pendingGate: null,
      pendingClarification: null,
      pauseReason: null,
      planVersion: 0,
      rejections: 0,
      implementationAttempts: 0,
      validationAttempts: 0,
      lastValidation: null,
      pullRequest: null,
      merged: false,
      error: null,
      lastSequence: meta.sequence,
      updatedAt: at,
    };
  }
  if (!state) throw new IllegalTransitionError(event.type, "none", "the run does not exist yet");

  const fail = (reason: string): never => {
    throw new IllegalTransitionError(event.type, state.status, reason);
  };
  const requireStatus = (...allowed: RunStatus[]) => {
    if (!allowed.includes(state.status)) fail(`expected ${allowed.join(" or ")}`);
  };
  const notTerminal = () => {
    if (TERMINAL_STATUSES.has(state.status)) fail("the run has ended");
  };
  const next = (changes: Partial<RunState>): RunState => {
    const result: RunState = { ...state, ...changes, lastSequence: meta.sequence, updatedAt: at };
    // A task's wait holds the run's slot only while the run waits for it: gone once the run runs (or ends, pauses) again.
    if (result.holdsSlot && !WAITS_HOLDING_SLOT.has(result.status)) delete result.holdsSlot;
    return result;
  };

  switch (event.type) {
    case "RUN_STARTED":
      requireStatus("queued");
      return next({ status: "running", startedAt: state.startedAt ?? at });

    case "RUN_QUEUED":
      requireStatus("running");
      return next({ status: "queued" });

    case "STAGE_STARTED":
      requireStatus("running");
      return next({ currentStage: event.payload.stage });

    case "STAGE_COMPLETED": {
      requireStatus("running");
      if (state.currentStage !== event.payload.stage) fail(`the current stage is ${state.currentStage ?? "none"}`);
      if (event.payload.stage !== "planning" || !state.replanning) return next({});
      // The re-plan under way ends with its planning stage.
      const { replanning: _ended, ...rest } = next({});
      return rest;
    }

    case "REPLAN_PROPOSED": {
      notTerminal();
      const { outcome } = event.payload;
      if (outcome === "planning") {
        requireStatus("running");
        if (state.replanning) fail("another re-plan is under way");
        return next({ replanning: { taskId: event.payload.taskId }, replans: (state.replans ?? 0) + (event.payload.counted ? 1 : 0) });
      }
      if (outcome === "joined") {
        requireStatus("awaiting_approval");
        if (!state.replanning || state.pendingGate?.kind !== "plan" || state.pendingGate.gateId !== event.payload.gateId) fail("no re-plan's gate is pending");
      }
      return next({});
    }

    case "PLAN_CREATED":
      requireStatus("running");
      if (state.currentStage !== "planning") fail("plans are created in the planning stage");
      if (event.payload.version <= state.planVersion) fail(`plan version ${event.payload.version} is not new`);
      return next({ planVersion: event.payload.version });

    case "PLAN_EDITED":
      requireStatus("running");
      if (event.payload.version <= state.planVersion) fail(`plan version ${event.payload.version} is not new`);
      return next({ planVersion: event.payload.version });

    case "APPROVAL_REQUESTED": {
      requireStatus("running");
      if (state.pendingGate) fail("another gate is pending");
      const { gateId, gateNumber, kind } = event.payload;
      return next({
        status: kind === "fix" ? "awaiting_fix_decision" : "awaiting_approval",
        pendingGate: { gateId, gateNumber, kind },
        pausedAt: at,
        ...(event.payload.taskId ? { holdsSlot: true } : {}),
      });
    }

    case "APPROVAL_GRANTED":
    case "APPROVAL_REJECTED":
      requireStatus("awaiting_approval");
      if (!state.pendingGate || state.pendingGate.gateId !== event.payload.gateId) fail("no such gate is pending");
      return next({
        status: "running",
        pendingGate: null,
        resumedAt: at,
        rejections: event.type === "APPROVAL_REJECTED" ? state.rejections + 1 : state.rejections,
      });

    case "PLAN_QUESTION_ASKED":
      // Like a rejection it sends the planner back to work, but it is not one: `rejections` stays.
      requireStatus("awaiting_approval");
      if (!state.pendingGate || state.pendingGate.gateId !== event.payload.gateId) fail("no such gate is pending");
      return next({ status: "running", pendingGate: null, resumedAt: at });

    case "PLAN_QUESTION_ANSWERED":
      requireStatus("running");
      return next({});

    case "FIX_DECISION_MADE":
      requireStatus("awaiting_fix_decision");
      if (!state.pendingGate || state.pendingGate.gateId !== event.payload.gateId) fail("no such gate is pending");
      return next({ status: "running", pendingGate: null, resumedAt: at });

    case "CLARIFICATION_REQUESTED":
      requireStatus("running");
      if (state.pendingClarification) fail("a clarification is already pending");
      return next({
        status: "awaiting_clarification",
        pendingClarification: { clarificationId: event.payload.clarificationId, stage: event.payload.stage },
        clarificationCount: state.clarificationCount + 1,
        pausedAt: at,
        ...(event.payload.taskId ? { holdsSlot: true } : {}),
      });

    case "CLARIFICATION_ANSWERED":
    case "CLARIFICATION_IGNORED":
      requireStatus("awaiting_clarification");
      if (state.pendingClarification?.clarificationId !== event.payload.clarificationId) {
        fail("no such clarification is pending");
      }
      return next({ status: "running", pendingClarification: null, resumedAt: at });

    case "DECISION_REMINDED":
    case "DECISION_TIMED_OUT":
    case "DECISION_ESCALATED":
    case "DECISION_DEFAULTED":
      // Steps of a pending decision's deadline: the decision itself (or the cancellation) is its own event.
      requireStatus("awaiting_approval", "awaiting_clarification", "awaiting_fix_decision");
      return next({});

    case "ARTIFACT_CREATED":
    case "TASK_STARTED":
    case "TASK_COMPLETED":
    case "TASK_BRANCH_CREATED":
    case "TASK_MERGED":
    case "TASK_MERGE_CONFLICT":
    case "SECRET_WITHHELD":
    case "SCOPE_REVERTED":
    case "POLICY_REFUSED":
    case "TASK_PROGRESS":
    case "IMPLEMENTER_NUDGED":
    case "TASK_TRIAGED":
    case "TASK_VERIFIED":
    case "TASK_VERIFY_FAILED":
    case "DEBUG_CLASSIFIED":
    case "CONTEXT_SUMMARISED":
    case "INSTRUCTIONS_LOADED":
    case "MCP_TOOL_CALLED":
    case "PLAN_ESTIMATED":
    case "BRANCH_PUSHED":
    case "PR_UPDATED":
      notTerminal();
      return next(
        event.type === "PR_UPDATED" && state.pullRequest
          ? {
              pullRequest: {
                ...state.pullRequest,
                draft: event.payload.draft ?? state.pullRequest.draft,
              },
            }
          : {},
      );

    case "BRANCH_CREATED":
      notTerminal();
      return next({ branch: event.payload.branch });

    case "IMPLEMENTATION_SUCCEEDED":
    case "IMPLEMENTATION_FAILED":
      requireStatus("running");
      if (state.currentStage !== "implementation") fail("the implementation stage is not running");
      return next({ implementationAttempts: Math.max(state.implementationAttempts, event.payload.attempt) });

    case "VALIDATION_PASSED":
    case "VALIDATION_FAILED":
      requireStatus("running");
      if (state.currentStage !== "validation") fail("the validation stage is not running");
      return next({
        validationAttempts: Math.max(state.validationAttempts, event.payload.attempt),
        lastValidation: event.type === "VALIDATION_PASSED" ? "passed" : "failed",
      });

    case "RUN_PAUSED":
      requireStatus("running", "awaiting_approval", "awaiting_clarification", "awaiting_fix_decision");
      return next({
        status: "paused",
        pausedAt: at,
        pauseReason: {
          reason: event.payload.reason,
          message: event.payload.message,
          stage: event.payload.stage ?? state.currentStage,
          ...(event.payload.plan ? { plan: event.payload.plan } : {}),
        },
      });

    case "PAUSE_REQUESTED":
      requireStatus("running");
      return next({});

    case "RUN_RESUMED":
      requireStatus("paused");
      return next({ status: "running", pauseReason: null, resumedAt: at });

    case "PR_OPENED":
      notTerminal();
      return next({
        pullRequest: { number: event.payload.number, url: event.payload.url, draft: event.payload.draft, state: "open" },
      });

    case "PR_MERGED":
      // A PR can be merged (by a person, on GitHub) after the run completed.
      if (state.status === "failed" || state.status === "cancelled") fail("the run has ended without delivery");
      return next({
        merged: true,
        pullRequest: state.pullRequest ? { ...state.pullRequest, draft: false, state: "merged" } : null,
      });

    case "MERGE_DECIDED":
      requireStatus("completed");
      if (state.merged) fail("the run is already merged");
      return next({});

    case "MERGE_FAILED":
      requireStatus("completed");
      return next({});

    case "PR_CLOSED":
      if (!state.pullRequest) fail("the run has no pull request");
      return next({ pullRequest: { ...state.pullRequest!, state: "closed" } });

    case "RUN_COMPLETED":
      requireStatus("running");
      return next({ status: "completed", completedAt: at, currentStage: state.currentStage });

    case "RUN_FAILED":
      notTerminal();
      return next({
        status: "failed",
        completedAt: at,
        error: event.payload.reason,
        pendingGate: null,
        pendingClarification: null,
      });

    case "RUN_CANCELLED":
      notTerminal();
      return next({ status: "cancelled", completedAt: at, pendingGate: null, pendingClarification: null });

    case "RUN_CLEANED_UP":
      requireStatus("failed", "cancelled");
      return next({});

    // A notice about the run failed to go out: recorded at any point of the run's life, changing nothing of its state.
    case "NOTIFICATION_FAILED":
      return next({});

    default: {
      const unknown: never = event;
      throw new IllegalTransitionError((unknown as { type: string }).type, state.status, "unknown event type");
    }
  }
}

/** Fold a whole event log (ordered by sequence) into the run's state. */
export function replayEvents(runId: string, events: ReadonlyArray<RunEvent & { sequence: number }>): RunState | null {
  let state: RunState | null = null;
  for (const event of events) state = apply(state, event, { runId, sequence: event.sequence });
  return state;
}

/** Whether an event type can be applied in the current state, without throwing. */
export function canApply(state: RunState | null, event: RunEvent, meta: Meta): boolean {
  try {
    apply(state, event, meta);
    return true;
  } catch (error) {
    if (error instanceof IllegalTransitionError) return false;
    throw error;
  }
}
