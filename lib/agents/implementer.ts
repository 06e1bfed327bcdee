import { generateText, stepCountIs, type ModelMessage } from "ai";
import { callModel } from "@/lib/ai/call";
import { section } from "@/lib/ai/prompt-sections";
import type { Sandbox } from "@/lib/sandbox/types";
import { redact, redactDeep } from "@/lib/redact";
import { promptFor, type ContextBudget, type PromptInfo } from "./context";
export type { ContextBudget, PromptInfo } from "./context";
import type { ModelStepOptions } from "./model-step";
import {
  applyIntervention,
  iterationTrouble,
  LOOP_REPEATS,
  MAX_IDLE_TURNS,
  nextIntervention,
  recordStop,
  stopMessage,
  type Intervention,
  type InterventionReason,
} from "./intervention";
import type { PendingMcpCall } from "./mcp/config";
import { mcpTools, settleMcpCall, type McpSession } from "./mcp/tools";
import { describePlan, type Plan } from "./plan";
import { StepBudgetExceededError, stepBudgetSignal } from "./step-budget";
import type { Policy, PolicyAction, PolicyRefusal } from "./policy";
import {
  clarificationResponseType,
  finishCommand,
  implementerTools,
  type PendingCommand,
  PROPOSE_REPLAN,
  REQUEST_CLARIFICATION,
  type Reflection,
  type ClarificationResponseType,
  type Todo,
  type ToolContext,
} from "./tools";

/**
 * The implementer as one model turn at a time: `implementerTurn({state})` makes one model call, runs the tools it asked
 * for, and returns the next state, which is plain JSON — so the workflow can make each turn a durable step and a run can
 * wait days for a clarification between two turns.
 */

export type ImplementerFailureReason = InterventionReason;

export type ImplementerState = {
  version: 1;
  /**
   * The conversation, or with `history` set only the messages added after it: the workflow keeps the conversation in
   * the database (lib/runs/conversation.ts) so a durable step's result stays small; implementerTurn sees it whole.
   */
  messages: ModelMessage[];
  /** The newest stored chunk of the conversation (implementer_chunks); absent while nothing is stored. */
  history?: string | null;
  todos: Todo[];
  iteration: number;
  maxIterations: number;
  /** Graduated intervention so far (./intervention.ts): nudge, firm reminder, stop and ask; absent in older states. */
  interventions?: Intervention[];
  /** Consecutive turns without tool use and without progress. */
  idleTurns: number;
  /** Tool call signature → times seen since the last progress (loop detection). */
  repeats: Record<string, number>;
  pendingClarification: {
    toolCallId: string;
    question: string;
    options: string[];
    context: string | null;
    /** Absent in states stored before questions had a type: then derived from the options. */
    responseType?: ClarificationResponseType;
  } | null;
  filesChanged: string[];
  /** Risky actions a person approved and the model has not used yet (policy fingerprints); absent in older states. */
  approvedActions?: string[];
  /** Files changed per todo, for policy.maxFilesPerTask; absent in older states. */
  taskFiles?: Record<string, string[]>;
  /** PAOR: every progress record so far (record_progress); absent in older states. */
  reflections?: Reflection[];
  /** A re-plan the implementer proposed, waiting for the plan gate; absent in older states. */
  pendingReplan?: { toolCallId: string; observation: string; proposal: string } | null;
  /** Every refusal under the policy so far (the workflow records the new ones of a turn as POLICY_REFUSED events). */
  refusals?: PolicyRefusal[];
  /**
   * A run_command still running detached when its step ended (its tool result is not in `messages` yet): the workflow
   * collects it (collectCommand) before the next model turn. Absent in older states.
   */
  pendingCommand?: PendingCommand | null;
  /** Set once the conversation had to be summarised to fit the model's context (recorded once, as CONTEXT_SUMMARISED). */
  contextSummarised?: boolean;
  /** The session's MCP tools (listed once, at its start) and an MCP call waiting for its own step; absent in older states. */
  mcp?: McpSession;
  pendingMcp?: PendingMcpCall | null;
  status: "running" | "awaiting_clarification" | "done" | "failed";
  summary: string | null;
  failure: { reason: ImplementerFailureReason; message: string } | null;
};

export type ImplementerTurnResult =
  | { kind: "continue"; state: ImplementerState }
  | { kind: "done"; state: ImplementerState; summary: string }
  | {
      kind: "clarification";
      state: ImplementerState;
      question: string;
      options: string[];
      context: string | null;
      responseType: ClarificationResponseType;
    }
  | { kind: "failure"; state: ImplementerState; reason: ImplementerFailureReason; message: string }
  /** A tool call needs a person's approval under the run's policy: the workflow opens a `policy` gate. */
  | { kind: "policy"; state: ImplementerState; action: PolicyAction }
  /** An observation broke the plan: the workflow re-plans and the new plan goes through the plan gate. */
  | { kind: "replan"; state: ImplementerState; observation: string; proposal: string }
  /** A command outlived the step: it runs on detached, and the workflow collects its result in later steps. */
  | { kind: "command_running"; state: ImplementerState; toolCallId: string }
  /** An MCP tool call: the workflow runs it in a step of its own (lib/runs/steps/mcp.ts), then the next turn. */
  | { kind: "mcp"; state: ImplementerState; call: PendingMcpCall };

export { StepBudgetExceededError };
export { applyDebugReplan, applyPolicyDecision, applyReplanDecision, applySentBackDecision, reopenTask } from "./implementer-decisions";

/** The tools' mutable context, from a state (a turn, or the collection of a detached command). */
function toolContext(
  state: ImplementerState,
  { sandbox, policy, scope, restore }: { sandbox: Sandbox; policy?: Policy; scope?: string[]; restore?: (paths: string[]) => Promise<void> },
): ToolContext {
  return {
    sandbox,
    todos: state.todos.map((t) => ({ ...t })),
    filesChanged: [...state.filesChanged],
    progress: false,
    policy,
    approved: [...(state.approvedActions ?? [])],
    hold: null,
    taskFiles: Object.fromEntries(Object.entries(state.taskFiles ?? {}).map(([k, v]) => [k, [...v]])),
    scope,
    refusals: [],
    restore,
    reflections: [],
  };
}

/** What the tools changed in their context, written back into the state. */
function withToolContext(state: ImplementerState, ctx: ToolContext, policy: Policy | undefined): ImplementerState {
  return {
    ...state,
    todos: ctx.todos,
    filesChanged: ctx.filesChanged,
    ...(policy
      ? {
          approvedActions: ctx.approved ?? [],
          taskFiles: ctx.taskFiles ?? {},
          refusals: [...(state.refusals ?? []), ...redactDeep(ctx.refusals ?? [])],
        }
      : {}),
  };
}

/**
 * A detached command ended (its result from Sandbox.detachedStatus): its tool result joins the conversation exactly as
 * an inline run's would have (the same output, the same policy checks after it), and the state has no pending command.
 * A protected path the command changed comes back as `hold` (the workflow opens a policy gate, as after a turn).
 */
export async function collectCommand({
  state,
  sandbox,
  result,
  policy,
  scope,
  restore,
}: {
  state: ImplementerState;
  sandbox: Sandbox;
  result: Parameters<typeof finishCommand>[0]["result"];
  policy?: Policy;
  scope?: string[];
  restore?: (paths: string[]) => Promise<void>;
}): Promise<{ state: ImplementerState; hold: PolicyAction | null }> {
  const pending = state.pendingCommand;
  if (!pending) return { state, hold: null };
  const ctx = toolContext(state, { sandbox, policy, scope, restore });
  let output: unknown;
  try {
    const value = await finishCommand({ ctx, pending, result });
    output = typeof value === "string" ? { type: "text", value } : { type: "json", value };
  } catch (error) {
    // As the AI SDK records a tool's error.
    output = { type: "error-json", value: error ?? null };
  }
  const part = { type: "tool-result", toolCallId: pending.toolCallId, toolName: "run_command", output };
  const message = redactDeep(JSON.parse(JSON.stringify({ role: "tool", content: [part] }))) as ModelMessage;
  const next: ImplementerState = {
    ...withToolContext(state, ctx, policy),
    messages: [...state.messages, message],
    pendingCommand: null,
    ...(ctx.progress ? { repeats: {} } : {}),
  };
  return { state: next, hold: ctx.hold ?? null };
}

/** The conversation without the placeholder result of the call left running (its real result comes later). */
function withoutPendingResult(messages: ModelMessage[], toolCallId: string): ModelMessage[] {
  return messages.flatMap((m): ModelMessage[] => {
    if (m.role !== "tool") return [m];
    const content = m.content.filter((p) => !(p.type === "tool-result" && p.toolCallId === toolCallId));
    return content.length ? [{ ...m, content }] : [];
  });
}

export const DEFAULT_MAX_ITERATIONS = 30;
export { LOOP_REPEATS, MAX_IDLE_TURNS };

const SYSTEM = `You are the implementer of Gatehouse, an orchestrator for autonomous coding agents.
Implement the approved plan in the repository using the tools. Work through your todos in order: call update_todo with
"in_progress" when you start one and "done" when it is finished. Only change files inside the plan's scope. Paths are
relative to the repository root. Run the acceptance criteria's commands to check your work when they exist. Ask a
clarification only when the plan and the repository cannot answer a question. After each todo, call record_progress with
an estimate from 0 to 1 and what changed. If an observation breaks the plan (an assumption proved false, a dependency is
missing), call propose_replan instead of working around it. When every todo is done, reply with a short summary of what
you changed and no tool call.`;

/** A parallel task's session: only its task, and what the tasks it depends on changed. */
function parallelTaskSections(task: { id: string; dependencies: string }): string[] {
  const only = `You implement only task ${task.id} of the plan, on a branch of its own. The plan's other tasks are done in other sessions, some at the same time as this one; do not do their work.`;
  return [section("parallel-task", only), ...(task.dependencies.trim() ? [section("dependencies-changed", task.dependencies)] : [])];
}

export function startImplementer({
  plan,
  request,
  memory,
  instructions,
  feedback,
  maxIterations = DEFAULT_MAX_ITERATIONS,
  skip = [],
  task,
}: {
  plan: Plan;
  /**
   * Parallel tasks (limits.maxConcurrentTasks): this session implements only this task of the plan, on its own branch;
   * `dependencies` says what the tasks it depends on changed (already merged into its starting point).
   */
  task?: { id: string; dependencies: string };
  request: string;
  memory?: string;
  /** The repository's instructions, quoted as repository content (lib/agents/instructions.ts). */
  instructions?: string;
  /** Tasks triage found already done (with its evidence): they are no todos of this session. */
  skip?: Array<{ id: string; evidence: string[] }>;
  /** Validator feedback when this session fixes a failed validation. */
  feedback?: string;
  maxIterations?: number;
}): ImplementerState {
  const skipped = new Set(skip.map((s) => s.id));
  const open = plan.tasks.filter((t) => !skipped.has(t.id) && (!task || t.id === task.id));
  const todos: Todo[] = open.map((t) => ({ id: t.id, title: t.title, status: "pending" }));
  const parts = [section("request", request), section("plan", describePlan(plan))];
  if (memory?.trim()) parts.push(section("memory", memory));
  if (instructions?.trim()) parts.push(instructions);
  if (task) parts.push(...parallelTaskSections(task));
  parts.push(section("todos", JSON.stringify(open.map((t) => ({ id: t.id, title: t.title, files: t.files, ...(t.description ? { description: t.description } : {}) })))));
  if (skip.length) {
    parts.push(
      section(
        "already-done",
        `Triage found these tasks already done in the repository; do not redo them:\n${skip.map((s) => `- ${s.id}: ${s.evidence.join("; ")}`).join("\n")}`,
      ),
    );
  }
  if (feedback?.trim()) parts.push(section("validation-feedback", `The previous attempt was not accepted. Fix this:\n${feedback}`));
  return {
    version: 1,
    messages: [{ role: "user", content: parts.join("\n\n") }],
    todos,
    iteration: 0,
    maxIterations,
    idleTurns: 0,
    repeats: {},
    pendingClarification: null,
    filesChanged: [],
    status: "running",
    summary: null,
    failure: null,
  };
}

/** Resume after a human answered the implementer's question. */
export function answerClarification(state: ImplementerState, answer: unknown): ImplementerState {
  const pending = state.pendingClarification;
  if (!pending) return state;
  return {
    ...state,
    status: "running",
    pendingClarification: null,
    messages: [
      ...state.messages,
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: pending.toolCallId,
            toolName: REQUEST_CLARIFICATION,
            output: { type: "json", value: { question: pending.question, answer: answer as never } },
          },
        ],
      },
    ],
  };
}

function stable(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stable).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

function fail(state: ImplementerState, reason: ImplementerFailureReason, message: string): ImplementerTurnResult {
  const next = { ...state, status: "failed" as const, failure: { reason, message } };
  return { kind: "failure", state: next, reason, message };
}

/** Level 3 of the graduated intervention: the session stops, and the workflow asks a person. */
function stop(state: ImplementerState, intervention: Intervention, message: string): ImplementerTurnResult {
  return fail(recordStop(state, intervention), intervention.reason, stopMessage(state, message));
}

/** A turn that goes on: with a nudge or a firm reminder when the implementer is in trouble (or its turns run low). */
function goOn(state: ImplementerState, trouble: Intervention | null): ImplementerTurnResult {
  const low = trouble ? null : iterationTrouble(state);
  const intervention = trouble ?? (low ? nextIntervention(state, "iteration_limit", low) : null);
  return { kind: "continue", state: intervention ? applyIntervention(state, intervention) : state };
}

function clarificationResult(state: ImplementerState): ImplementerTurnResult {
  const p = state.pendingClarification!;
  return {
    kind: "clarification",
    state,
    question: p.question,
    options: p.options,
    context: p.context,
    responseType: p.responseType ?? clarificationResponseType(undefined, p.options),
  };
}

function openTodos(todos: Todo[]): Todo[] {
  return todos.filter((t) => t.status !== "done");
}

/**
 * One model turn. Idempotent on finished states: a state that is done, failed or awaiting an answer is returned as is.
 * Model failures throw ModelCallError (the workflow pauses); everything the agent does wrong ends in a `failure`.
 */
export async function implementerTurn({
  state,
  sandbox,
  modelId,
  model,
  context,
  signal,
  policy,
  scope,
  restore,
  stepEndsAt,
  now = Date.now,
  contextBudget,
  onPrompt,
}: {
  state: ImplementerState;
  sandbox: Sandbox;
  /**
   * Bounded context: the prompt (system, tool definitions, messages) is kept within `window × summariseAt` tokens by
   * summarising the conversation (lib/agents/context.ts); absent, the whole conversation is sent.
   */
  contextBudget?: ContextBudget;
  /** Told what the turn sends (after summarising), e.g. to record that the context was summarised. */
  onPrompt?: (info: PromptInfo) => void;
  /** The run's policy for risky actions (lib/agents/policy.ts). */
  policy?: Policy;
  /** The plan's files and folders (a delete outside them is risky). */
  scope?: string[];
  /** Undoes a command's changes the policy refuses (ToolContext.restore). */
  restore?: (paths: string[]) => Promise<void>;
  // signal also aborts the turn's commands; a command that would outlive stepEndsAt runs detached (ToolContext.stepEndsAt).
} & ModelStepOptions): Promise<ImplementerTurnResult> {
  if (state.pendingCommand) return { kind: "command_running", state, toolCallId: state.pendingCommand.toolCallId };
  if (state.pendingMcp) return { kind: "mcp", state, call: state.pendingMcp };
  if (state.status === "awaiting_clarification") return clarificationResult(state);
  if (state.pendingReplan) return { kind: "replan", state, observation: state.pendingReplan.observation, proposal: state.pendingReplan.proposal };
  if (state.status === "done") return { kind: "done", state, summary: state.summary ?? "" };
  if (state.status === "failed") return fail(state, state.failure!.reason, state.failure!.message);
  if (state.iteration >= state.maxIterations) {
    const detail = `The implementer used all ${state.maxIterations} turns without finishing.`;
    return stop(state, { ...nextIntervention(state, "iteration_limit", detail), level: 3 }, detail);
  }

  const ctx: ToolContext = {
    ...toolContext(state, { sandbox, policy, scope, restore }),
    stepEndsAt,
    now,
    pendingCommand: null,
    toolsStarted: false,
    conversation: state.messages,
  };
  const tools = { ...implementerTools(ctx), ...mcpTools(ctx, state.mcp) };
  const prompt = promptFor({ state, system: SYSTEM, tools, contextBudget });
  onPrompt?.(prompt.info);
  // Once a tool starts, the model has answered: the budget no longer cuts the call (the tools bound themselves).
  for (const t of Object.values(tools) as Array<{ execute?: (...a: unknown[]) => unknown }>) {
    const execute = t.execute;
    if (execute) {
      t.execute = (...a: unknown[]) => {
        ctx.toolsStarted = true;
        return execute(...a);
      };
    }
  }
  const budget = stepBudgetSignal({ stepEndsAt, now, armed: () => !ctx.toolsStarted });
  const callSignal = signal ? AbortSignal.any([signal, budget.signal]) : budget.signal;
  let result;
  try {
    result = await callModel({
      modelId,
      model,
      context: { ...context, stage: "implementation" },
      signal: callSignal,
      run: async ({ model }) => {
        // Tools may have run in a failed attempt's predecessor only if the model answered; reset per attempt anyway.
        ctx.progress = false;
        const r = await generateText({
          model,
          system: SYSTEM,
          messages: prompt.messages,
          tools,
          stopWhen: stepCountIs(1),
          maxRetries: 0,
          abortSignal: callSignal,
        });
        return { value: r, usage: r.totalUsage };
      },
    });
  } catch (error) {
    if (budget.exceeded() && !signal?.aborted) throw new StepBudgetExceededError();
    throw error;
  } finally {
    budget.stop();
  }

  // Plain JSON only: the state is stored by the durable step (executor_steps) and sent back to the model, so whatever
  // the model or a tool put in it (tool inputs, file contents, output) is redacted first.
  let newMessages = redactDeep(JSON.parse(JSON.stringify(result.response.messages)) as ModelMessage[]);
  const pending = ctx.pendingCommand;
  if (pending) newMessages = withoutPendingResult(newMessages, pending.toolCallId);
  const settled = settleMcpCall(newMessages, ctx, Boolean(pending || ctx.hold));
  newMessages = settled.messages;
  let next: ImplementerState = {
    ...withToolContext(state, ctx, policy),
    messages: [...state.messages, ...newMessages],
    iteration: state.iteration + 1,
    ...(ctx.reflections?.length ? { reflections: [...(state.reflections ?? []), ...redactDeep(ctx.reflections)] } : {}),
    ...(pending ? { pendingCommand: pending } : {}),
    ...(settled.pending ? { pendingMcp: settled.pending } : {}),
  };

  const calls = result.toolCalls;

  if (calls.length === 0) {
    const open = openTodos(next.todos);
    if (open.length === 0) {
      const summary = redact(result.text.trim()) || "Implementation finished.";
      next = { ...next, status: "done", summary, idleTurns: 0 };
      return { kind: "done", state: next, summary };
    }
    const idleTurns = ctx.progress ? 0 : state.idleTurns + 1;
    if (idleTurns >= MAX_IDLE_TURNS) {
      const detail = `The implementer stopped ${idleTurns} times in a row with todos still open (${open.map((t) => t.id).join(", ")}).`;
      const trouble = nextIntervention(next, "no_progress", detail);
      if (trouble.level === 3) return stop({ ...next, idleTurns }, trouble, detail);
      return goOn({ ...next, idleTurns }, trouble);
    }
    const nudge = `You stopped, but these todos are still open: ${open
      .map((t) => `${t.id} "${t.title}" (${t.status})`)
      .join("; ")}. Continue with the tools, and mark each todo done with update_todo when it is finished.`;
    return goOn({ ...next, idleTurns, messages: [...next.messages, { role: "user", content: nudge }] }, null);
  }

  // Loop detection: identical calls counted since the last real change.
  const repeats: Record<string, number> = ctx.progress ? {} : { ...state.repeats };
  let looping: string | null = null;
  for (const call of calls) {
    if ((call.toolName === REQUEST_CLARIFICATION || call.toolName === PROPOSE_REPLAN) && !call.invalid) continue;
    // Stored with the state: the signature is redacted like the messages (the same secret gives the same signature).
    const key = redact(`${call.toolName}:${stable(call.input)}`);
    repeats[key] = (repeats[key] ?? 0) + 1;
    if (repeats[key] >= LOOP_REPEATS) looping ??= `You called ${call.toolName} with the same arguments ${repeats[key]} times without making progress.`;
  }
  next = { ...next, repeats, idleTurns: 0 };
  // A loop: nudged, then firmly reminded (on a plain turn; a turn that waits for something is told on the next one),
  // then stopped.
  const loop = looping ? nextIntervention(next, "loop", looping) : null;
  if (loop?.level === 3) return stop(next, loop, `The implementer is looping: ${looping!.replace(/^You called/, "it called")}`);

  // An ask whose input failed the schema already has its error as the tool result; the model corrects it next turn.
  const asks = calls.filter((c) => c.toolName === REQUEST_CLARIFICATION && !c.invalid);
  if (asks.length > 0) {
    const [ask, ...extra] = asks;
    const input = redactDeep(ask!.input) as { question: string; options?: string[]; responseType?: ClarificationResponseType; context?: string };
    const offered = (input.options ?? []).filter((o) => o.trim());
    const responseType = clarificationResponseType(input.responseType, offered);
    // Options belong to choices only: a free-text or file question shows none.
    const options = responseType === "single_choice" || responseType === "multiple_choice" ? offered : [];
    // One question at a time; the others get an answer the model can act on.
    refuseExtra(next, extra, REQUEST_CLARIFICATION, "Only one question at a time; ask again after the first is answered.");
    next = {
      ...next,
      status: "awaiting_clarification",
      pendingClarification: {
        toolCallId: ask!.toolCallId,
        question: input.question,
        options,
        context: input.context ?? null,
        responseType,
      },
    };
    return clarificationResult(next);
  }
  const replans = calls.filter((c) => c.toolName === PROPOSE_REPLAN && !c.invalid);
  if (replans.length > 0) {
    const [first, ...extra] = replans;
    const input = redactDeep(first!.input) as { observation: string; proposal: string };
    refuseExtra(next, extra, PROPOSE_REPLAN, "One re-plan at a time.");
    next = { ...next, pendingReplan: { toolCallId: first!.toolCallId, observation: input.observation, proposal: input.proposal } };
    return { kind: "replan", state: next, observation: input.observation, proposal: input.proposal };
  }
  // A risky action waits for a person (the call already has its "needs approval" result); the decision comes next.
  if (ctx.hold) return { kind: "policy", state: next, action: ctx.hold };
  if (pending) return { kind: "command_running", state: next, toolCallId: pending.toolCallId };
  if (settled.pending) return { kind: "mcp", state: next, call: settled.pending };
  return goOn(next, loop);
}

/** Calls of a one-at-a-time tool beyond the first get an error result the model can act on. */
function refuseExtra(state: ImplementerState, extra: Array<{ toolCallId: string }>, toolName: string, message: string) {
  if (!extra.length) return;
  state.messages.push({
    role: "tool",
    content: extra.map((c) => ({ type: "tool-result" as const, toolCallId: c.toolCallId, toolName, output: { type: "error-text" as const, value: message } })),
  });
}
