import type { PlanDocument, RunEventPayloads, RunEventType } from "@/lib/workflow/events";

/** An event as the API returns it (GET /api/runs/:id/events and the SSE stream). */
export type ApiEvent = { sequence: number; type: string; payload: Record<string, unknown>; timestamp: string };

export type Tone = "info" | "success" | "warning" | "danger" | "waiting";

export type TimelineItem = { sequence: number; type: string; timestamp: string; title: string; detail?: string; tone: Tone };

/** Add newly received events to the known ones: ordered by sequence, each sequence once (SSE and polling may overlap). */
export function mergeEvents(known: readonly ApiEvent[], incoming: readonly ApiEvent[]): ApiEvent[] {
  if (incoming.length === 0) return known as ApiEvent[];
  const last = known.at(-1)?.sequence ?? 0;
  if (incoming.every((e, i) => e.sequence > last && (i === 0 || e.sequence > incoming[i - 1]!.sequence))) {
    return [...known, ...incoming];
  }
  const bySequence = new Map<number, ApiEvent>();
  for (const e of known) bySequence.set(e.sequence, e);
  for (const e of incoming) bySequence.set(e.sequence, e);
  return [...bySequence.values()].sort((a, b) => a.sequence - b.sequence);
}

function p<K extends RunEventType>(event: ApiEvent, _type: K): Partial<RunEventPayloads[K]> {
  return event.payload as Partial<RunEventPayloads[K]>;
}

const text = (v: unknown) => (typeof v === "string" && v.trim() ? v : undefined);

/** A decision made from Slack or Telegram (chat_decisions), as the run detail gives it: who, on what, when. */
export type ChatOrigin = { subjectId: string; action: string; provider: "slack" | "telegram"; userId: string; at: string };

/** Which chat actions (lib/notifications/buttons.ts VERBS) each decision event can come from. */
const CHAT_ACTIONS: Record<string, readonly string[]> = {
  APPROVAL_GRANTED: ["approve", "raise the budget", "finish the task, then stop"],
  APPROVAL_REJECTED: ["reject"],
  PLAN_QUESTION_ASKED: ["ask back"],
  FIX_DECISION_MADE: ["retry the fix", "accept anyway", "cancel at the fix decision"],
  CLARIFICATION_ANSWERED: ["answer"],
  RUN_RESUMED: ["retry", "extend"],
  RUN_CANCELLED: ["cancel", "cancel at the budget gate", "cancel at the fix decision"],
};

/**
 * The chat a decision event was made from, or null (the dashboard, the API, the CLI): the chat decision of the same
 * person and action on the gate or question the event names (each is decided once); for an event that names none (a
 * resume, a cancel), the one recorded within a minute after it (the decision is stored first, then recorded as from chat).
 */
export function chatOriginOf(event: ApiEvent, origins: readonly ChatOrigin[]): ChatOrigin | null {
  const actions = CHAT_ACTIONS[event.type];
  const by = event.payload.by;
  if (!actions || typeof by !== "string" || origins.length === 0) return null;
  const subject = event.payload.gateId ?? event.payload.clarificationId;
  const at = Date.parse(event.timestamp);
  return (
    origins.find(
      (o) =>
        o.userId === by &&
        actions.includes(o.action) &&
        (typeof subject === "string" ? o.subjectId === subject : Date.parse(o.at) - at > -5_000 && Date.parse(o.at) - at < 60_000),
    ) ?? null
  );
}

const PROVIDER: Record<ChatOrigin["provider"], string> = { slack: "Slack", telegram: "Telegram" };

/** One line per event for the timeline: what happened, in words, with a tone for its icon and colour. */
export function describeEvent(event: ApiEvent, people: Record<string, string> = {}, origins: readonly ChatOrigin[] = []): TimelineItem {
  // "by Ann", or "by Ann from Slack" when the decision was made from chat.
  const origin = chatOriginOf(event, origins);
  const name = (id: string) => `${people[id] ?? id}${origin && origin.userId === id ? ` from ${PROVIDER[origin.provider]}` : ""}`;
  const base = { sequence: event.sequence, type: event.type, timestamp: event.timestamp };
  const item = (title: string, tone: Tone, detail?: string): TimelineItem => ({ ...base, title, tone, ...(detail ? { detail } : {}) });
  switch (event.type) {
    case "RUN_CREATED": {
      // Notes on the set-up (a project default's model replaced for lack of its key) show with a warning tone.
      const notes = (p(event, "RUN_CREATED").notes ?? []).filter((n) => text(n));
      return notes.length ? item("Run created, with notes", "warning", notes.join(" ")) : item("Run created", "info");
    }
    case "RUN_STARTED":
      return item("Run started", "info");
    case "RUN_QUEUED":
      return item("Queued", "warning", text(p(event, "RUN_QUEUED").reason));
    case "STAGE_STARTED": {
      const { stage, attempt } = p(event, "STAGE_STARTED");
      return item(`${cap(stage ?? "stage")} started`, "info", attempt && attempt > 1 ? `attempt ${attempt}` : undefined);
    }
    case "STAGE_COMPLETED":
      return item(`${cap(p(event, "STAGE_COMPLETED").stage ?? "stage")} completed`, "success");
    case "PLAN_CREATED": {
      const { version, plan, feedback } = p(event, "PLAN_CREATED");
      return item(`Plan v${version ?? "?"} created`, "info", text(feedback) ? `after feedback: ${feedback}` : plan?.summary);
    }
    case "PLAN_EDITED": {
      const { version, by } = p(event, "PLAN_EDITED");
      return item(`Plan edited → v${version ?? "?"}`, "info", by ? `by ${name(by)}` : undefined);
    }
    case "REPLAN_PROPOSED": {
      const { taskId, reason, outcome } = p(event, "REPLAN_PROPOSED");
      const who = taskId ? `Task ${taskId}` : "The implementation";
      const what =
        outcome === "joined"
          ? `${who}'s re-plan proposal joined the open plan gate`
          : outcome === "outdated"
            ? `${who}'s re-plan proposal dropped: the plan changed since the task began (it runs afresh)`
            : outcome === "limit"
              ? `${who}'s re-plan proposal refused: no more re-plans (limits.maxReplans)`
              : `${who} proposes a re-plan`;
      return item(what, outcome === "planning" || outcome === "joined" ? "waiting" : "info", text(reason) || undefined);
    }
    case "APPROVAL_REQUESTED": {
      const { kind, gateNumber } = p(event, "APPROVAL_REQUESTED");
      return item(`Waiting for ${kind ?? "an"} approval`, "waiting", gateNumber ? `gate ${gateNumber}` : undefined);
    }
    case "APPROVAL_GRANTED": {
      const { by, notes, editedPlan } = p(event, "APPROVAL_GRANTED");
      return item(editedPlan ? "Approved with an edited plan" : "Approved", "success", [by && `by ${name(by)}`, text(notes)].filter(Boolean).join(" — ") || undefined);
    }
    case "APPROVAL_REJECTED": {
      const { by, feedback } = p(event, "APPROVAL_REJECTED");
      return item("Rejected", "danger", [by && `by ${name(by)}`, text(feedback)].filter(Boolean).join(" — ") || undefined);
    }
    case "PLAN_QUESTION_ASKED": {
      const { by, question } = p(event, "PLAN_QUESTION_ASKED");
      return item("Question to the planner", "waiting", [by && `by ${name(by)}`, text(question)].filter(Boolean).join(" — ") || undefined);
    }
    case "PLAN_QUESTION_ANSWERED": {
      const { answer, version } = p(event, "PLAN_QUESTION_ANSWERED");
      return item(`Planner answered → plan v${version ?? "?"}`, "info", text(answer) || undefined);
    }
    case "FIX_DECISION_MADE": {
      const { decision, by } = p(event, "FIX_DECISION_MADE");
      const label = decision === "retry" ? "Retry the fix" : decision === "accept" ? "Accepted anyway" : decision === "replan" ? "Back to planning" : "Cancel";
      return item(`Fix decision: ${label}`, decision === "cancel" ? "danger" : "success", by ? `by ${name(by)}` : undefined);
    }
    case "CLARIFICATION_REQUESTED":
      return item("Question asked", "waiting", p(event, "CLARIFICATION_REQUESTED").question);
    case "CLARIFICATION_ANSWERED": {
      const { by } = p(event, "CLARIFICATION_ANSWERED");
      return item("Question answered", "success", by ? `by ${name(by)}` : undefined);
    }
    case "CLARIFICATION_IGNORED": {
      const { by } = p(event, "CLARIFICATION_IGNORED");
      return item("Question skipped: proceed with best judgement", "info", by ? `by ${name(by)}` : undefined);
    }
    case "DECISION_REMINDED": {
      const { subject, deadline } = p(event, "DECISION_REMINDED");
      return item(`Reminder: the ${subject?.type === "clarification" ? "question" : "gate"} is still open`, "waiting", deadline ? `deadline ${new Date(deadline).toISOString()}` : undefined);
    }
    case "DECISION_TIMED_OUT": {
      const { subject, action } = p(event, "DECISION_TIMED_OUT");
      const then = action === "escalate" ? "escalated" : action === "default" ? "the default applies" : "the run is cancelled";
      return item(`Deadline passed on the ${subject?.type === "clarification" ? "question" : "gate"}`, "warning", then);
    }
    case "DECISION_ESCALATED": {
      const { to } = p(event, "DECISION_ESCALATED");
      const who = to && "userId" in to ? name(to.userId) : to && "role" in to ? `the project's ${to.role}s` : undefined;
      return item("Escalated to a backup approver", "warning", who ? `${who} may now decide` : undefined);
    }
    case "DECISION_DEFAULTED":
    {
      const d = p(event, "DECISION_DEFAULTED");
      return d.outsideOptions
        ? item("The declared default applied (not one of the question's options)", "warning", text(d.answer))
        : item("The declared default applied", "info", text(d.answer));
    }
    case "ARTIFACT_CREATED": {
      const { type, path } = p(event, "ARTIFACT_CREATED");
      return item(`Artifact: ${type ?? "file"}`, "info", path);
    }
    case "TASK_STARTED": {
      const { index, total, taskId } = p(event, "TASK_STARTED");
      // The workflow numbers tasks from 1 (lib/runs/steps/implement.ts: index + 1).
      return item(`Task ${index ?? "?"} of ${total ?? "?"} started`, "info", taskId);
    }
    case "TASK_COMPLETED":
      return item("Task completed", "success", p(event, "TASK_COMPLETED").taskId);
    case "TASK_BRANCH_CREATED": {
      const { taskId, branch, run } = p(event, "TASK_BRANCH_CREATED");
      return item((run ?? 1) > 1 ? `Task ${taskId} runs again on the merged branch` : `Task ${taskId} started on its own branch`, "info", branch);
    }
    case "TASK_MERGED": {
      const { taskId, branch } = p(event, "TASK_MERGED");
      return item(`Task ${taskId} merged into the run branch`, "success", branch);
    }
    case "TASK_MERGE_CONFLICT": {
      const { taskId, files, next } = p(event, "TASK_MERGE_CONFLICT");
      return item(`Task ${taskId} conflicts with the run branch${next === "rerun" ? " (it runs once more)" : ""}`, "warning", (files ?? []).join(", "));
    }
    case "TASK_TRIAGED": {
      const { taskId, confidence, skipped } = p(event, "TASK_TRIAGED");
      return item(skipped ? "Task already done (skipped)" : "Task may be done (implemented anyway)", skipped ? "success" : "info", `${taskId} · confidence ${Math.round((confidence ?? 0) * 100)}%`);
    }
    case "TASK_PROGRESS": {
      const { taskId, progress, changed } = p(event, "TASK_PROGRESS");
      return item(`Progress on ${taskId ?? "a task"}: ${Math.round((progress ?? 0) * 100)}%`, "info", changed);
    }
    case "TASK_VERIFIED": {
      const { taskId, commands } = p(event, "TASK_VERIFIED");
      return item(`Task ${taskId ?? "?"} verified`, "success", (commands ?? []).map((c) => `\`${c}\``).join(", ") || undefined);
    }
    case "TASK_VERIFY_FAILED": {
      const { taskId, command, exitCode } = p(event, "TASK_VERIFY_FAILED");
      return item(`Task ${taskId ?? "?"} failed its check`, "danger", `\`${command ?? "?"}\` exited ${exitCode ?? "(timed out)"}`);
    }
    case "DEBUG_CLASSIFIED": {
      const { taskId, category, action, reason } = p(event, "DEBUG_CLASSIFIED");
      const next = action === "fix" ? "fixing it" : action === "ask" ? "asking a person" : "escalating";
      return item(`Debug: ${category ?? "?"} failure in ${taskId ?? "a task"}, ${next}`, action === "fix" ? "info" : "warning", text(reason));
    }
    case "PLAN_ESTIMATED": {
      const total = (p(event, "PLAN_ESTIMATED").estimate as { total?: { costUsd?: { low?: number; high?: number } } }).total?.costUsd;
      const range = total && typeof total.low === "number" && typeof total.high === "number" ? `$${total.low.toFixed(4)} – $${total.high.toFixed(4)}` : null;
      return item("Cost estimate made (plan approved without a gate)", "info", range ? `whole run ${range}` : undefined);
    }
    case "CONTEXT_SUMMARISED": {
      const { omittedMessages, budget } = p(event, "CONTEXT_SUMMARISED");
      return item("Conversation summarised to fit the context", "info", `${omittedMessages ?? "?"} earlier messages summarised · budget ${budget ?? "?"} tokens`);
    }
    case "INSTRUCTIONS_LOADED": {
      const { stage, files } = p(event, "INSTRUCTIONS_LOADED");
      const list = (files ?? []).map((f) => `${f.path}${f.shown < f.bytes ? " (cut)" : ""}`).join(", ");
      return item(`Repository instructions read for ${stage ?? "a stage"}`, "info", list || undefined);
    }
    case "MCP_TOOL_CALLED": {
      const { server, tool, isError, result } = p(event, "MCP_TOOL_CALLED");
      return item(`MCP tool ${server ?? "?"}.${tool ?? "?"} ${isError ? "failed" : "called"}`, isError ? "warning" : "info", text(result));
    }
    case "POLICY_REFUSED": {
      const { summary, reason } = p(event, "POLICY_REFUSED");
      return item("Refused by the policy", "warning", `${summary}: ${reason}`);
    }
    case "IMPLEMENTATION_SUCCEEDED":
      return item("Implementation finished", "success", `attempt ${p(event, "IMPLEMENTATION_SUCCEEDED").attempt ?? 1}`);
    case "IMPLEMENTER_NUDGED": {
      const { level, reason, detail, taskId } = p(event, "IMPLEMENTER_NUDGED");
      const what = level === 1 ? "Implementer nudged" : level === 2 ? "Implementer firmly reminded of its todos" : "Implementer stopped: a person decides";
      return item(`${what}${taskId ? ` (${taskId})` : ""}`, level === 3 ? "danger" : "warning", `${(reason ?? "trouble").replace("_", " ")}: ${detail ?? ""}`);
    }
    case "IMPLEMENTATION_FAILED":
      return item("Implementation failed", "danger", p(event, "IMPLEMENTATION_FAILED").reason);
    case "VALIDATION_PASSED": {
      const { score } = p(event, "VALIDATION_PASSED");
      return item("Validation passed", "success", score !== undefined ? `score ${score}/10` : undefined);
    }
    case "VALIDATION_FAILED": {
      const { score, summary } = p(event, "VALIDATION_FAILED");
      return item("Validation failed", "danger", [score !== undefined && `score ${score}/10`, text(summary)].filter(Boolean).join(" — ") || undefined);
    }
    case "RUN_PAUSED": {
      const { reason, message } = p(event, "RUN_PAUSED");
      return item(`Paused: ${(reason ?? "other").replaceAll("_", " ")}`, "warning", message);
    }
    case "PAUSE_REQUESTED": {
      const { by } = p(event, "PAUSE_REQUESTED");
      return item("Pause requested", "waiting", by ? `by ${name(by)}; the run pauses at its next step` : undefined);
    }
    case "RUN_RESUMED": {
      const { by, action } = p(event, "RUN_RESUMED");
      return item(action === "extend" ? "Resumed with more time" : "Resumed", "info", by ? `by ${name(by)}` : undefined);
    }
    case "BRANCH_CREATED":
      return item("Branch created", "info", p(event, "BRANCH_CREATED").branch);
    case "BRANCH_PUSHED":
      return item("Branch pushed", "info", p(event, "BRANCH_PUSHED").branch);
    case "PR_OPENED": {
      const { number, draft } = p(event, "PR_OPENED");
      return item(`Pull request #${number ?? "?"} opened`, "success", draft ? "draft" : undefined);
    }
    case "PR_UPDATED":
      return item(`Pull request #${p(event, "PR_UPDATED").number ?? "?"} updated`, "info");
    case "PR_MERGED": {
      const { sha, by } = p(event, "PR_MERGED");
      // A commit as git shows it in one line: its first 7 characters, not the 40 of the full id.
      return item("Merged", "success", [by ? `by ${name(by)}` : null, sha ? `commit ${String(sha).slice(0, 7)}` : null].filter(Boolean).join(" — ") || undefined);
    }
    case "MERGE_DECIDED": {
      const { by, notes } = p(event, "MERGE_DECIDED");
      return item("Merge decided", "info", [by ? `by ${name(by)}` : null, text(notes)].filter(Boolean).join(" — ") || undefined);
    }
    case "MERGE_FAILED":
      return item("Merge failed", "danger", p(event, "MERGE_FAILED").reason);
    case "SCOPE_REVERTED":
      return item("Out-of-scope changes taken back", "warning", `Restored to the run's base: ${(p(event, "SCOPE_REVERTED").files ?? []).join(", ")}`);
    case "SECRET_WITHHELD":
      return item("Secret withheld", "warning", `Not committed before the wait (${p(event, "SECRET_WITHHELD").when}): ${(p(event, "SECRET_WITHHELD").files ?? []).join(", ")}`);
    case "PR_CLOSED":
      return item(`Pull request #${p(event, "PR_CLOSED").number ?? "?"} closed`, "warning");
    case "RUN_COMPLETED":
      return item("Run completed", "success", p(event, "RUN_COMPLETED").summary);
    case "RUN_FAILED":
      return item("Run failed", "danger", p(event, "RUN_FAILED").reason);
    case "RUN_CANCELLED": {
      const { by, reason } = p(event, "RUN_CANCELLED");
      return item("Run cancelled", "danger", [by && `by ${name(by)}`, text(reason)].filter(Boolean).join(" — ") || undefined);
    }
    case "RUN_CLEANED_UP": {
      const { branch, branchDeleted, worktreeRemoved, olderThanDays } = p(event, "RUN_CLEANED_UP");
      const removed = [branchDeleted && branch ? `branch ${branch}` : null, worktreeRemoved ? "worktree" : null].filter(Boolean).join(" and ");
      return item("Cleaned up", "info", `${removed || "nothing left"} removed, ${olderThanDays} days after the run ended`);
    }
    case "NOTIFICATION_FAILED": {
      const { channel, personal, subject, attempts, error } = p(event, "NOTIFICATION_FAILED");
      const what = subject?.type === "clarification" ? "question" : subject?.type === "run" ? "run" : "gate";
      return item("Notification failed", "warning", `${personal ? "A personal " : "The "}${channel ?? ""} notice about the ${what} was not delivered after ${attempts ?? "?"} attempt(s): ${error ?? "unknown error"}. See the project's delivery log.`);
    }
    default:
      return item(event.type.replaceAll("_", " ").toLowerCase(), "info");
  }
}

function cap(s: string) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

export type StageProgress = {
  stage: string;
  /** When the current stage started (ISO), for the elapsed-time clock. */
  startedAt: string;
  attempt: number;
  /** The task being worked on, from the latest TASK_STARTED in this stage (index counts from 1). */
  task: { taskId: string; index: number; total: number } | null;
  tasksCompleted: number;
};

/** Progress of the stage that is running now, or null when no stage is in progress. */
export function stageProgress(events: readonly ApiEvent[]): StageProgress | null {
  let progress: StageProgress | null = null;
  for (const event of events) {
    if (event.type === "STAGE_STARTED") {
      const { stage, attempt } = p(event, "STAGE_STARTED");
      progress = { stage: stage ?? "unknown", startedAt: event.timestamp, attempt: attempt ?? 1, task: null, tasksCompleted: 0 };
    } else if (event.type === "STAGE_COMPLETED" || event.type === "RUN_COMPLETED" || event.type === "RUN_FAILED" || event.type === "RUN_CANCELLED") {
      progress = null;
    } else if (progress && event.type === "TASK_STARTED") {
      const { taskId, index, total } = p(event, "TASK_STARTED");
      progress.task = { taskId: taskId ?? "", index: index ?? 1, total: total ?? 0 };
    } else if (progress && event.type === "TASK_COMPLETED") {
      progress.tasksCompleted += 1;
    }
  }
  return progress;
}

export type PlanVersion = {
  version: number;
  plan: PlanDocument;
  source: "planner" | "edit";
  by?: string;
  feedback?: string | null;
  timestamp: string;
};

/** Every plan version the run has had, oldest first (a later event for the same version replaces an earlier one). */
export function planVersions(events: readonly ApiEvent[]): PlanVersion[] {
  const byVersion = new Map<number, PlanVersion>();
  for (const event of events) {
    if (event.type !== "PLAN_CREATED" && event.type !== "PLAN_EDITED") continue;
    const payload = event.payload as Partial<RunEventPayloads["PLAN_CREATED"] & RunEventPayloads["PLAN_EDITED"]>;
    if (!payload.plan || typeof payload.version !== "number") continue;
    byVersion.set(payload.version, {
      version: payload.version,
      plan: payload.plan,
      source: event.type === "PLAN_EDITED" ? "edit" : "planner",
      ...(payload.by ? { by: payload.by } : {}),
      ...(payload.feedback !== undefined ? { feedback: payload.feedback } : {}),
      timestamp: event.timestamp,
    });
  }
  return [...byVersion.values()].sort((a, b) => a.version - b.version);
}

export type TaskTriage = { confidence: number; evidence: string[]; skipped: boolean };

/** Triage's verdict per task id (TASK_TRIAGED), for the plan card. */
export function taskTriage(events: readonly ApiEvent[]): Record<string, TaskTriage> {
  const out: Record<string, TaskTriage> = {};
  for (const event of events) {
    if (event.type !== "TASK_TRIAGED") continue;
    const t = event.payload as Partial<RunEventPayloads["TASK_TRIAGED"]>;
    if (!t.taskId || typeof t.confidence !== "number") continue;
    out[t.taskId] = { confidence: t.confidence, evidence: t.evidence ?? [], skipped: t.skipped === true };
  }
  return out;
}

export type ValidationResult = { passed: boolean; attempt: number; score?: number; report?: string; summary?: string; timestamp: string };

/** Every validation outcome, oldest first. */
export function validations(events: readonly ApiEvent[]): ValidationResult[] {
  const out: ValidationResult[] = [];
  for (const event of events) {
    if (event.type !== "VALIDATION_PASSED" && event.type !== "VALIDATION_FAILED") continue;
    const payload = event.payload as Partial<RunEventPayloads["VALIDATION_FAILED"]>;
    out.push({
      passed: event.type === "VALIDATION_PASSED",
      attempt: payload.attempt ?? out.length + 1,
      ...(payload.score !== undefined ? { score: payload.score } : {}),
      ...(payload.report ? { report: payload.report } : {}),
      ...(payload.summary ? { summary: payload.summary } : {}),
      timestamp: event.timestamp,
    });
  }
  return out;
}
