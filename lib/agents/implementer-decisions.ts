import { section } from "@/lib/ai/prompt-sections";
import { redact } from "@/lib/redact";
import type { ImplementerState } from "./implementer";
import { describePlan, type Plan } from "./plan";
import type { PolicyAction } from "./policy";
import { PROPOSE_REPLAN, REQUEST_CLARIFICATION, type Todo } from "./tools";

/*
 * What the implementer is told between turns when something outside it decided: a person on a held action or a
 * re-plan, the debug step reopening a task. Each returns the next state (plain JSON); lib/agents/implementer re-exports
 * them.
 */

/**
 * A person's decision on a held action, told to the model: approved, the action may run once (exactly as asked);
 * refused, the model must do without it.
 */
export function applyPolicyDecision(
  state: ImplementerState,
  action: PolicyAction,
  decision: { approved: boolean; by: string | null; notes: string | null },
): ImplementerState {
  const who = decision.by ? `${decision.by}` : "A person";
  const note = decision.notes?.trim() ? ` Their note: ${redact(decision.notes.trim())}` : "";
  const text = decision.approved
    ? `${who} approved: ${action.summary} (${action.tool}). Do it now, exactly as before.${note}`
    : `${who} refused: ${action.summary} (${action.tool}). Do not try it again; find another way, or say in your summary what is left undone.${note}`;
  return {
    ...state,
    approvedActions: decision.approved ? [...(state.approvedActions ?? []), action.fingerprint] : (state.approvedActions ?? []),
    messages: [...state.messages, { role: "user", content: text }],
  };
}

/**
 * A plan gate's decision on a plan drafted mid-implementation (a re-plan, or a question sent back to planning): the
 * person's note, whether a new plan was approved, and the todos to go on with (the new plan's, a todo already done
 * staying done; else the current ones).
 */
function afterPlanDecision(state: ImplementerState, decision: { approved: boolean; plan: Plan | null; notes: string | null }) {
  const note = decision.notes?.trim() ? ` Note: ${redact(decision.notes.trim())}` : "";
  const done = new Set(state.todos.filter((t) => t.status === "done").map((t) => t.id));
  const approved = decision.approved && decision.plan;
  const todos: Todo[] = approved
    ? decision.plan!.tasks.map((t) => ({ id: t.id, title: t.title, status: done.has(t.id) ? "done" : "pending" }))
    : state.todos;
  return { note, approved, todos, done };
}

/**
 * The plan gate's decision on the implementer's re-plan, as the propose_replan call's result. Approved: the new plan
 * replaces the todos (a todo already done stays done) and is shown to the model. Refused (or not drafted): it goes on
 * with the approved plan.
 */
export function applyReplanDecision(
  state: ImplementerState,
  decision: { approved: boolean; plan: Plan | null; notes: string | null },
): ImplementerState {
  const pending = state.pendingReplan;
  if (!pending) return state;
  const { note, approved, todos, done } = afterPlanDecision(state, decision);
  const text = approved
    ? `The re-plan was approved. Work from this plan now; your todos are: ${todos.map((t) => `${t.id} (${t.status})`).join(", ")}.${note}\n\n${describePlan(decision.plan!)}`
    : `The re-plan was not approved. Go on with the approved plan.${note}`;
  return {
    ...state,
    todos,
    pendingReplan: null,
    messages: [
      ...state.messages,
      { role: "tool", content: [{ type: "tool-result", toolCallId: pending.toolCallId, toolName: PROPOSE_REPLAN, output: { type: "text", value: text } }] },
      ...(approved
        ? [
            {
              role: "user" as const,
              content: section(
                "todos",
                JSON.stringify(decision.plan!.tasks.filter((t) => !done.has(t.id)).map((t) => ({ id: t.id, title: t.title, files: t.files }))),
              ),
            },
          ]
        : []),
    ],
  };
}

/**
 * Per-task verification failed and the debug step chose to fix it (or a person answered its question, or retried at
 * the fix gate): the task is open again and the model is told why, with the failing command's output, so the next
 * turns are a fix pass on that task. A finished session goes on (status running), and loop counters start afresh.
 */
export function reopenTask(
  state: ImplementerState,
  {
    failure,
    verdict,
    answer,
    note,
  }: {
    failure: { taskId: string; command: string; exitCode: number | null; output: string };
    verdict: { category: string; reason: string; question?: string | null } | null;
    /** A person's answer to the debug step's question. */
    answer?: string | null;
    /** A person's note (the fix gate's retry). */
    note?: string | null;
  },
): ImplementerState {
  const todos = state.todos.map((t) => (t.id === failure.taskId ? { ...t, status: "pending" as const } : t));
  const lines = [
    `Task ${failure.taskId}'s own acceptance command failed right after you marked it done, so it is open again.`,
    `Command: ${failure.command}`,
    `Exit code: ${failure.exitCode ?? "timed out"}`,
    `Output (its end):\n${redact(failure.output)}`,
  ];
  if (verdict) lines.push(`The debug step classified it as a ${verdict.category} failure: ${redact(verdict.reason)}`);
  if (verdict?.question && answer?.trim()) lines.push(`A person answered the question "${redact(verdict.question)}": ${redact(answer.trim())}`);
  if (note?.trim()) lines.push(`A person's note: ${redact(note.trim())}`);
  lines.push(`Fix task ${failure.taskId} now, run \`${failure.command}\` to check it passes, and mark the task done with update_todo again.`);
  return {
    ...state,
    todos,
    status: state.status === "done" ? "running" : state.status,
    summary: state.status === "done" ? null : state.summary,
    idleTurns: 0,
    repeats: {},
    messages: [...state.messages, { role: "user", content: section("verify-failure", lines.join("\n")) }],
  };
}

/**
 * A re-plan the debug step escalated (its failure was the plan's) was decided at the plan gate: told to the model as a
 * message (no tool call of its own to answer). Approved, the new plan's tasks are the todos (one done stays done).
 */
export function applyDebugReplan(
  state: ImplementerState,
  decision: { approved: boolean; plan: Plan | null; notes: string | null },
): ImplementerState {
  const note = decision.notes?.trim() ? ` Note: ${redact(decision.notes.trim())}` : "";
  if (!decision.approved || !decision.plan) {
    return { ...state, messages: [...state.messages, { role: "user", content: `The re-plan after the failed check was not approved. Go on with the approved plan.${note}` }] };
  }
  const done = new Set(state.todos.filter((t) => t.status === "done").map((t) => t.id));
  const todos: Todo[] = decision.plan.tasks.map((t) => ({ id: t.id, title: t.title, status: done.has(t.id) ? "done" : "pending" }));
  const open = decision.plan.tasks.filter((t) => !done.has(t.id)).map((t) => ({ id: t.id, title: t.title, files: t.files }));
  return {
    ...state,
    todos,
    status: todos.every((t) => t.status === "done") ? state.status : "running",
    summary: todos.every((t) => t.status === "done") ? state.summary : null,
    messages: [
      ...state.messages,
      { role: "user", content: `The re-plan after the failed check was approved. Work from this plan now.${note}\n\n${describePlan(decision.plan)}` },
      { role: "user", content: section("todos", JSON.stringify(open)) },
    ],
  };
}

/**
 * A person sent the implementer's question back to planning instead of answering it: the plan gate's decision on the
 * re-plan drafted with the question is the question's answer. Approved: the new plan replaces the todos (a todo already
 * done stays done) and is shown to the model. Refused (or not drafted): it goes on with the approved plan and its best
 * judgement.
 */
export function applySentBackDecision(
  state: ImplementerState,
  decision: { approved: boolean; plan: Plan | null; notes: string | null },
): ImplementerState {
  const pending = state.pendingClarification;
  if (!pending) return state;
  const { note, approved, todos } = afterPlanDecision(state, decision);
  const answer = approved
    ? `A person sent this question back to planning instead of answering it, and the new plan (drafted with the question) was approved. Work from it now; your todos are: ${todos.map((t) => `${t.id} (${t.status})`).join(", ")}.${note}`
    : `A person sent this question back to planning, and no new plan was approved.${note} Go on with the approved plan: proceed with your best judgement, and state the assumption you made in your summary.`;
  return {
    ...state,
    status: "running",
    todos,
    pendingClarification: null,
    messages: [
      ...state.messages,
      {
        role: "tool",
        content: [{ type: "tool-result", toolCallId: pending.toolCallId, toolName: REQUEST_CLARIFICATION, output: { type: "json", value: { question: pending.question, answer } } }],
      },
      ...(approved ? [{ role: "user" as const, content: `${describePlan(decision.plan!)}` }] : []),
    ],
  };
}
