import type { GateKind } from "./types";
import type { OnTimeout, Stage } from "./config";

/** A plan as the planner returns it and the dashboard shows it (carried in PLAN_CREATED / PLAN_EDITED). */
export type PlanDocument = {
  summary: string;
  mermaid: string;
  /** `checks`: the task's own acceptance commands (from tasks.md), run by triage. */
  tasks: Array<{ id: string; title: string; description?: string; dependsOn?: string[]; files?: string[]; checks?: string[] }>;
  acceptanceCriteria: Array<{ id?: string; description: string; command?: string }>;
  risks?: string[];
  /** The tasks.md the plan was made from: its checkboxes are checked and committed as tasks finish. */
  tasksFile?: { path: string };
  /** Tasks of the tasks.md that were already checked: not part of the plan, skipped. */
  skipped?: Array<{ id: string; title: string; reason: string }>;
};

/** A gate or a clarification question: what a deadline, a reminder or an escalation is about. */
export type DecisionSubject = { type: "gate" | "clarification"; id: string };

/**
 * A decision's deadline (config.deadlines, lib/runs/deadlines.ts), fixed when the gate or question opened: epoch ms of
 * the deadline and of each reminder, and what happens at the deadline.
 */
export type DecisionDeadlineInfo = { at: number; reminders: number[]; onTimeout: OnTimeout };

/**
 * Every state change of a run is one of these events, appended to workflow_events with the next sequence number.
 * Payloads are plain JSON. Names never appear as bare strings elsewhere: use `RunEventType`.
 */
export type RunEventPayloads = {
  RUN_CREATED: {
    projectId: string;
    userId: string;
    request: string;
    config: Record<string, unknown>;
    branch?: string | null;
    /** Runs started together to explore approaches share a group (GET /api/run-groups/:id). */
    groupId?: string | null;
    /** Notes on how the run was set up, shown with its creation (a project default's model replaced for lack of its key). */
    notes?: string[];
    /**
     * A follow-up to a pull request review: the run works on the pull request's existing branch (`branch`) from its
     * current tip and pushes to the same pull request, instead of branching from the base.
     */
    followUp?: { runId: string; pullRequest: number | null } | null;
  };
  RUN_STARTED: Record<string, never> | { by?: string };
  /** A computing run went back to the queue (it resumed from a wait while its user's concurrency limit was full). */
  RUN_QUEUED: { reason: string };
  STAGE_STARTED: { stage: Stage; attempt?: number };
  STAGE_COMPLETED: { stage: Stage };
  PLAN_CREATED: { version: number; plan?: PlanDocument; path?: string; commitSha?: string; feedback?: string | null };
  PLAN_EDITED: { version: number; by: string; plan?: PlanDocument; path?: string; commitSha?: string };
  /**
   * A re-plan proposed during implementation (by the implementer, the debug step, or a person sending a question back
   * to planning), and what the run made of it — one re-plan at a time per run: `planning` (it is drafted and goes to
   * the plan gate; `counted` toward limits.maxReplans), `joined` (a parallel task's proposal joined the plan gate
   * `gateId` another task's re-plan opened: its reason is shown there, the gate's decision is its too), `outdated` (the
   * run's plan changed since the proposing task began: its session ends and runs afresh under the new plan), `limit`
   * (limits.maxReplans reached: no re-plan).
   */
  REPLAN_PROPOSED: { taskId: string | null; reason: string; outcome: "planning" | "joined" | "outdated" | "limit"; counted?: boolean; gateId?: string };
  /** `taskId`: opened by a parallel task, while the run's other tasks compute on (the run keeps its slot). */
  APPROVAL_REQUESTED: { gateId: string; gateNumber: number; kind: GateKind; artifactVersion?: number | null; deadline?: DecisionDeadlineInfo; taskId?: string };
  /** `planHash`: on a plan gate, the hash of the plan approved (with the edits), frozen from here (lib/workflow/plan-hash.ts). */
  APPROVAL_GRANTED: { gateId: string; by: string; notes?: string | null; editedPlan?: boolean; planHash?: string };
  APPROVAL_REJECTED: { gateId: string; by: string; feedback: string };
  /** "Ask back" on a plan gate: a person asked the planner a question; it answers and revises the plan (not a rejection). */
  PLAN_QUESTION_ASKED: { gateId: string; by: string; question: string };
  /** The planner's answer to a PLAN_QUESTION_ASKED, with the version of the revised plan it gave alongside. */
  PLAN_QUESTION_ANSWERED: { gateId: string; question: string; answer: string; version: number };
  /** `replan` only at the fix gate about a stopped implementer (inngest/run/stuck.ts), where `accept` is refused. */
  FIX_DECISION_MADE: { gateId: string; by: string; decision: "retry" | "accept" | "cancel" | "replan" };
  /** `taskId`: asked by a parallel task, while the run's other tasks compute on (the run keeps its slot). */
  CLARIFICATION_REQUESTED: { clarificationId: string; stage: Stage; question: string; deadline?: DecisionDeadlineInfo; taskId?: string };
  /** A reminder point of a pending decision's deadline passed (`reminder` counts from 0); people were notified. */
  DECISION_REMINDED: { subject: DecisionSubject; reminder: number; deadline: number };
  /** A decision's deadline passed with nobody deciding; `action` is what happens now (the next event says how). */
  DECISION_TIMED_OUT: { subject: DecisionSubject; deadline: number; action: OnTimeout["action"] };
  /** The decision went to a backup approver: `to` (and the people it names, `recipients`) may now decide it too. */
  DECISION_ESCALATED: { subject: DecisionSubject; to: { role: "owner" | "approver" | "viewer" } | { userId: string }; recipients: string[] };
  /** The declared default was applied as the decision (followed by the decision's own event, by "deadline"). */
  /** outsideOptions: a question's default that named none of its options, given as free text. */
  DECISION_DEFAULTED: { subject: DecisionSubject; answer: string; outsideOptions?: boolean };
  CLARIFICATION_ANSWERED: { clarificationId: string; by: string };
  /** A person chose not to answer: the asking stage proceeds with its best judgement and notes the assumption. */
  /** Skipped: the stage goes on with its best judgement, or (`then: "planning"`) the run goes back to planning with the question. */
  CLARIFICATION_IGNORED: { clarificationId: string; by: string; then?: "planning" };
  ARTIFACT_CREATED: { artifactId?: string; type: string; path: string; commitSha?: string | null; version?: number };
  /** `index` counts from 1: task `index` of `total`. */
  TASK_STARTED: { taskId: string; index: number; total: number };
  TASK_COMPLETED: { taskId: string; commitSha?: string | null };
  /**
   * Parallel tasks (limits.maxConcurrentTasks): the task's own branch was cut from the run branch at `baseSha` for
   * its `run`-th run (a re-run after a merge conflict is the 2nd), in scheduling `round`.
   */
  TASK_BRANCH_CREATED: {
    taskId: string;
    branch: string;
    baseSha: string;
    run: number;
    round: number;
    /** The sandbox the task works in: its lane's (handed on from the lane's task before), absent for its own. */
    workspace?: string;
  };
  /** Parallel tasks: the task's branch merged into the run branch (host-side git), as merge commit `commitSha`. */
  TASK_MERGED: { taskId: string; branch: string; commitSha: string };
  /** Parallel tasks: the task's branch conflicts with the run branch in `files`; `next` says what the run does. */
  TASK_MERGE_CONFLICT: { taskId: string; branch: string; files: string[]; next: "rerun" | "gate" };
  /** Files left out of a work-in-progress commit before a wait because their changes hold a secret (paths redacted). */
  SECRET_WITHHELD: { files: string[]; when: string };
  /**
   * Sent back to implementation at the plan gate about scope: the files outside the plan were restored on the run
   * branch to the run's base (new ones deleted, changed ones restored) in one commit (paths redacted).
   */
  SCOPE_REVERTED: { files: string[]; commitSha: string; attempt: number };
  /**
   * Triage before implementing: the task looks already done with this confidence (0–1), on this evidence; `skipped`
   * when at or above the run's triage.threshold (otherwise it is implemented anyway). Only tasks with some confidence.
   */
  TASK_TRIAGED: { taskId: string; confidence: number; evidence: string[]; skipped: boolean };
  /** PAOR reflection: after a task, the implementer's estimate of its progress (0–1) and what changed. */
  TASK_PROGRESS: { taskId: string; progress: number; changed: string };
  /**
   * Graduated intervention in an implementer session in trouble (lib/agents/intervention.ts): level 1 a nudge, 2 a
   * firm reminder with the todo list, 3 stopped — a person decides next (the fix gate about a stopped implementer).
   * `taskId` for a parallel task's session.
   */
  IMPLEMENTER_NUDGED: { level: 1 | 2 | 3; reason: "loop" | "no_progress" | "iteration_limit"; detail: string; iteration: number; taskId?: string };
  /** Per-task verification: the task's own acceptance commands passed right after it was finished. */
  TASK_VERIFIED: { taskId: string; commands: string[] };
  /** Per-task verification: one of the task's acceptance commands failed (its output's tail, redacted). */
  TASK_VERIFY_FAILED: { taskId: string; command: string; exitCode: number | null; output: string; attempt: number };
  /**
   * The debug step's verdict on a failed verification, and what the run does about it: `fix` (another implementer pass
   * on the task), `ask` (a question for a person), `escalate` (a re-plan through the plan gate for a plan problem, else
   * the fix gate); `parsed` false when the model's answer could not be read. `exhausted`: the task's debug attempts
   * (limits.maxDebugAttempts) were used up, so it escalates whatever the verdict.
   */
  DEBUG_CLASSIFIED: {
    taskId: string;
    category: "compile" | "test" | "environment" | "plan";
    action: "fix" | "ask" | "escalate";
    reason: string;
    attempt: number;
    parsed: boolean;
    exhausted?: boolean;
  };
  /**
   * Bounded context: the implementer's conversation no longer fit `budget` tokens (the model's context window times
   * context.summariseAt) and from this turn on is sent summarised (recorded once per implementation attempt).
   */
  CONTEXT_SUMMARISED: { omittedMessages: number; keptToolResults: number; tokens: number; budget: number };
  /**
   * The cost estimate of a plan approved without a gate (trustMode.planning "auto"): what a plan gate would have shown
   * (lib/runs/estimate-model.ts RunEstimate), kept so the run can be compared with it after.
   */
  PLAN_ESTIMATED: { version: number; estimate: Record<string, unknown> };
  /**
   * The repository's instructions a stage's prompt quoted (AGENTS.md, CLAUDE.md, .github/copilot-instructions.md): each
   * file's path, size, sha256 and the bytes quoted (fewer than its size when cut). Once per stage and set of files.
   */
  INSTRUCTIONS_LOADED: { stage: "planning" | "implementation" | "validation"; files: Array<{ path: string; bytes: number; sha: string; shown: number }> };
  /** The project's policy refused an implementer's tool call (deny/allow list, file cap); the model was told why. */
  POLICY_REFUSED: { tool: "run_command" | "write_file" | "edit_file" | "mcp"; summary: string; reason: string };
  /**
   * The implementer called a tool of an MCP server (its own durable step): the server, the tool, the arguments and the
   * result, each redacted and capped; `isError` when the server reported the call failed (or could not be reached).
   */
  MCP_TOOL_CALLED: { server: string; tool: string; arguments: string; result: string; isError: boolean };
  IMPLEMENTATION_SUCCEEDED: { attempt: number; commitSha?: string | null };
  IMPLEMENTATION_FAILED: { attempt: number; reason: string };
  VALIDATION_PASSED: { attempt: number; score?: number; report?: string };
  VALIDATION_FAILED: { attempt: number; score?: number; summary?: string; report?: string };
  RUN_PAUSED: {
    reason: "model_outage" | "model_auth" | "timeout" | "invalid_plan" | "merge_conflict" | "sandbox" | "secret_detected" | "by_person" | "storage" | "database" | "other";
    message: string;
    stage?: Stage | null;
    /** invalid_plan: the planner's plan with its invalid diagram, for a person to fix by hand (POST /resume). */
    plan?: PlanDocument;
  };
  /** `editedPlan`: the run was paused for an invalid plan and a person fixed it by hand; the run goes on with that plan. */
  /** `at`: when, on the workflow clock (the one stage deadlines use; absent on resumes written before it was recorded). */
  RUN_RESUMED: { by: string; action?: "retry" | "extend"; editedPlan?: PlanDocument | null; at?: number };
  /** A person asked a computing run to pause; it parks at its next turn boundary (RUN_PAUSED, reason by_person). */
  PAUSE_REQUESTED: { by: string; note?: string | null };
  BRANCH_CREATED: { branch: string; baseSha?: string };
  BRANCH_PUSHED: { branch: string; sha: string; remote?: string };
  PR_OPENED: { number: number; url: string; draft: boolean };
  PR_UPDATED: { number: number; draft?: boolean; state?: string };
  PR_MERGED: { number?: number | null; sha?: string | null; method?: string; /** The person whose merge decision this was. */ by?: string };
  /** A person decided to merge a completed run that was not merged (accepted after failed validation, or autoMerge off). */
  MERGE_DECIDED: { by: string; notes?: string | null };
  /** A merge decided by a person could not be made (a conflict, a moved base, a refused pull request). */
  MERGE_FAILED: { reason: string; files?: string[] };
  PR_CLOSED: { number: number };
  RUN_COMPLETED: { summary?: string };
  RUN_FAILED: { reason: string; stage?: Stage | null };
  RUN_CANCELLED: { by: string; reason?: string };
  /**
   * The cleanup sweep removed what a failed or cancelled run left behind, `olderThanDays` after it ended: its branch in
   * the local repository (or the GitHub project's cache clone; never on GitHub) and its worktree.
   */
  RUN_CLEANED_UP: { branch: string | null; branchDeleted: boolean; worktreeRemoved: boolean; olderThanDays: number };
  /**
   * A decision notice could not be delivered on a channel after its retries (lib/notifications); the run is not
   * affected. The delivery log holds the details and offers redelivery; no address, URL or secret is put here.
   */
  NOTIFICATION_FAILED: {
    deliveryId: string;
    channel: "webhook" | "email" | "slack" | "telegram";
    personal: boolean;
    /** The decision a notice was about, or the run itself for a run notice (completed, failed, paused). */
    subject: { type: "gate" | "clarification" | "run"; id: string };
    reason: string;
    attempts: number;
    error: string;
  };
};

export type RunEventType = keyof RunEventPayloads;

/**
 * The event types queries look up by type (the inbox, deadlines, estimates, merges, clean-up): the only rows of the
 * partial index workflow_events_run_type_idx, so the frequent events (task progress, artifacts, model turns) do not
 * write an entry there on every append. A query by type goes through eventTypeIn (lib/db/event-store.ts), which
 * repeats the index's condition word for word: SQLite uses a partial index only for a query that states it. The order
 * is the index condition's (lib/db/schema.ts TYPE_INDEX_CONDITION, the migrations): do not reorder.
 */
export const TYPE_INDEXED_EVENTS = [
  "STAGE_STARTED",
  "STAGE_COMPLETED",
  "PLAN_CREATED",
  "PLAN_EDITED",
  "PLAN_ESTIMATED",
  "APPROVAL_REQUESTED",
  "APPROVAL_GRANTED",
  "APPROVAL_REJECTED",
  "PLAN_QUESTION_ASKED",
  "FIX_DECISION_MADE",
  "CLARIFICATION_REQUESTED",
  "CLARIFICATION_ANSWERED",
  "CLARIFICATION_IGNORED",
  "DECISION_REMINDED",
  "DECISION_TIMED_OUT",
  "DECISION_ESCALATED",
  "RUN_PAUSED",
  "RUN_RESUMED",
  "RUN_COMPLETED",
  "RUN_FAILED",
  "RUN_CANCELLED",
  "MERGE_DECIDED",
  "MERGE_FAILED",
  "PR_MERGED",
  "RUN_CLEANED_UP",
] as const satisfies readonly RunEventType[];

/** An event as the reducer sees it: type, payload and the time it happened. */
export type RunEvent = {
  [K in RunEventType]: { type: K; payload: RunEventPayloads[K]; timestamp: number };
}[RunEventType];

/** A new event before it is stamped. */
export type NewRunEvent = {
  [K in RunEventType]: { type: K; payload: RunEventPayloads[K] };
}[RunEventType];

/** An event as stored: with its per-run sequence number. */
export type StoredRunEvent = RunEvent & { id: string; runId: string; sequence: number };
