import type { ModelMessage } from "ai";
import { z } from "zod";
import { section } from "@/lib/ai/prompt-sections";
import { estimateTokens } from "@/lib/ai/scripted-model";
import type { Todo } from "./tools";

/**
 * Bounded context: what of the implementer's conversation is sent to the model when the whole would not fit its
 * context window. The conversation itself is never shortened: it is stored whole (implementer_chunks, see
 * lib/runs/conversation.ts) and only the prompt is summarised, anew on each turn, from it:
 *
 *   1. the first message (the request, the plan, the memory, the todos as planned) — verbatim, always;
 *   2. a summary of the turns left out: the todo list as it stands, the decisions (people's answers and decisions,
 *      re-plans, verification failures, nudges) verbatim, and one line per earlier tool call with a reference to its
 *      stored output (`#<message>`, readable again with the recall_output tool);
 *   3. the last turns verbatim, with at most `keepToolResults` tool results (fewer when even those do not fit, and a
 *      kept output cut to its end as the last resort).
 *
 * Turns are cut at message boundaries that keep every tool result with the call it answers.
 */

/** Tokens of a message as sent (its JSON: close enough to what a provider counts, and the same measure everywhere). */
export function messageTokens(message: ModelMessage): number {
  return estimateTokens(JSON.stringify(message));
}

export function conversationTokens(messages: ModelMessage[]): number {
  return messages.reduce((n, m) => n + messageTokens(m), 0);
}

export type BoundedPrompt = {
  messages: ModelMessage[];
  /** Null when the conversation fit as it is. */
  summary: { omittedMessages: number; keptToolResults: number; tokens: number } | null;
};

const MAX_DECISION_CHARS = 600;
const MAX_DIGEST_LINES = 60;
/** The least a kept tool output is cut to, when nothing else is left to shorten. */
const MIN_KEPT_OUTPUT_CHARS = 200;

type Group = { start: number; messages: ModelMessage[]; toolResults: number };

/** Turns: an assistant or user message with the tool messages that answer it. */
function groupsOf(messages: ModelMessage[], from: number): Group[] {
  const groups: Group[] = [];
  for (let i = from; i < messages.length; i++) {
    const m = messages[i]!;
    const results = m.role === "tool" ? m.content.filter((p) => p.type === "tool-result").length : 0;
    const last = groups.at(-1);
    if (m.role === "tool" && last) {
      last.messages.push(m);
      last.toolResults += results;
    } else {
      groups.push({ start: i, messages: [m], toolResults: results });
    }
  }
  return groups;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : "")).join("\n");
  return "";
}

function clip(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max)}…`;
}

function outputValue(output: unknown): unknown {
  return output && typeof output === "object" && "value" in output ? (output as { value: unknown }).value : output;
}

/** One line for a tool result: what the call did and how it ended, never its whole output. */
function resultDigest(toolName: string, output: unknown): string {
  const type = output && typeof output === "object" && "type" in output ? String((output as { type: unknown }).type) : "";
  const value = outputValue(output);
  if (type.startsWith("error")) return `error: ${clip(typeof value === "string" ? value : JSON.stringify(value), 100)}`;
  if (value && typeof value === "object") {
    const v = value as Record<string, unknown>;
    if (toolName === "run_command" && "exitCode" in v) return `exit ${String(v.exitCode)}`;
    if ("ok" in v) return v.ok ? "ok" : "not ok";
  }
  const text = typeof value === "string" ? value : JSON.stringify(value ?? null);
  return `${text.length} chars`;
}

function inputDigest(toolName: string, input: unknown): string {
  if (!input || typeof input !== "object") return "";
  const i = input as Record<string, unknown>;
  if (typeof i.path === "string") return i.path;
  if (typeof i.command === "string") return clip([i.command, ...(Array.isArray(i.args) ? i.args : [])].join(" "), 80);
  if (toolName === "update_todo") return `${String(i.id)} → ${String(i.status)}`;
  return clip(JSON.stringify(input), 80);
}

/** What the summary keeps of the omitted turns: decisions verbatim, and a digest line per tool call. */
function digestOf(messages: ModelMessage[], offset: number): { decisions: string[]; calls: string[] } {
  const decisions: string[] = [];
  const calls: string[] = [];
  const names = new Map<string, { name: string; input: unknown }>();
  messages.forEach((m, k) => {
    const index = offset + k;
    if (m.role === "user") {
      const text = textOf(m.content);
      if (text.trim()) decisions.push(`#${index} ${clip(text, MAX_DECISION_CHARS)}`);
      return;
    }
    if (m.role === "assistant" && Array.isArray(m.content)) {
      for (const p of m.content) if (p.type === "tool-call") names.set(p.toolCallId, { name: p.toolName, input: p.input });
      return;
    }
    if (m.role !== "tool") return;
    for (const p of m.content) {
      if (p.type !== "tool-result") continue;
      const call = names.get(p.toolCallId);
      const value = outputValue(p.output);
      // Answers and plan decisions are decisions: kept as they were.
      if (p.toolName === "request_clarification" || p.toolName === "propose_replan") {
        decisions.push(`#${index} ${p.toolName}: ${clip(typeof value === "string" ? value : JSON.stringify(value), MAX_DECISION_CHARS)}`);
        continue;
      }
      calls.push(`#${index} ${p.toolName}${call ? ` ${inputDigest(p.toolName, call.input)}` : ""}: ${resultDigest(p.toolName, p.output)}`);
    }
  });
  return { decisions, calls };
}

function summaryText({
  omitted,
  todos,
  decisions,
  calls,
  omittedCalls,
  omittedDecisions,
}: {
  omitted: number;
  todos: Todo[];
  decisions: string[];
  calls: string[];
  omittedCalls: number;
  omittedDecisions: number;
}): string {
  const lines = [
    `${omitted} earlier messages of this session are summarised here to fit the context window. Every tool output is stored whole: #<n> is its message number; call recall_output with it to read one again.`,
    "",
    "Todo list now:",
    ...todos.map((t) => `- ${t.id} "${t.title}": ${t.status}`),
  ];
  if (decisions.length || omittedDecisions) {
    lines.push("", "Decisions and instructions so far (verbatim):");
    if (omittedDecisions) lines.push(`(${omittedDecisions} older ones not shown)`);
    lines.push(...decisions);
  }
  if (calls.length || omittedCalls) {
    lines.push("", "Earlier tool calls:");
    if (omittedCalls) lines.push(`(${omittedCalls} older calls not shown)`);
    lines.push(...calls);
  }
  return section("conversation-summary", lines.join("\n"));
}

/** A kept tool message with each output cut to its last `max` characters (the stored one stays whole). */
function cutOutputs(m: ModelMessage, index: number, max: number): ModelMessage {
  if (m.role !== "tool") return m;
  return {
    ...m,
    content: m.content.map((p) => {
      if (p.type !== "tool-result") return p;
      const value = outputValue(p.output);
      const text = typeof value === "string" ? value : JSON.stringify(value ?? null);
      if (text.length <= max) return p;
      return { ...p, output: { type: "text" as const, value: `(output cut to its last ${max} of ${text.length} characters; recall_output ${index} reads it whole)\n${text.slice(-max)}` } };
    }),
  };
}

/**
 * The messages to send: the conversation as is when it fits `budgetTokens`, else summarised (see the top of the file).
 * The first message is never cut: a plan larger than the budget is sent whole and the rest shrinks around it.
 */
export function boundConversation({
  messages,
  todos,
  budgetTokens,
  keepToolResults,
}: {
  messages: ModelMessage[];
  todos: Todo[];
  budgetTokens: number;
  keepToolResults: number;
}): BoundedPrompt {
  if (messages.length < 2 || conversationTokens(messages) <= budgetTokens) return { messages, summary: null };
  const head = messages[0]!;
  const groups = groupsOf(messages, 1);

  // The most recent turns holding at most keepToolResults tool results (always the newest turn).
  let keep = 0;
  let results = 0;
  for (let g = groups.length - 1; g >= 0; g--) {
    if (keep > 0 && results + groups[g]!.toolResults > keepToolResults) break;
    results += groups[g]!.toolResults;
    keep += 1;
  }

  let maxCalls = MAX_DIGEST_LINES;
  let maxDecisions = Number.POSITIVE_INFINITY;
  let outputCap = Number.POSITIVE_INFINITY;
  for (;;) {
    const kept = groups.slice(groups.length - keep);
    const cut = kept[0]?.start ?? messages.length;
    const { decisions, calls } = digestOf(messages.slice(1, cut), 1);
    const shownCalls = calls.slice(Math.max(0, calls.length - maxCalls));
    const shownDecisions = decisions.slice(Math.max(0, decisions.length - maxDecisions));
    const summary = summaryText({
      omitted: cut - 1,
      todos,
      decisions: shownDecisions,
      calls: shownCalls,
      omittedCalls: calls.length - shownCalls.length,
      omittedDecisions: decisions.length - shownDecisions.length,
    });
    const first: ModelMessage =
      head.role === "user" && typeof head.content === "string" ? { role: "user", content: `${head.content}\n\n${summary}` } : head;
    const rest = kept.flatMap((g) => g.messages.map((m, k) => (Number.isFinite(outputCap) ? cutOutputs(m, g.start + k, outputCap) : m)));
    const out = head === first ? [first, { role: "user" as const, content: summary }, ...rest] : [first, ...rest];
    const tokens = conversationTokens(out);
    if (tokens <= budgetTokens) {
      const keptResults = kept.reduce((n, g) => n + g.toolResults, 0);
      return { messages: out, summary: { omittedMessages: cut - 1, keptToolResults: keptResults, tokens } };
    }
    // Shrink, least valuable first: older digest lines, then older verbatim turns, then older decisions, then outputs.
    if (maxCalls > 5 && shownCalls.length > 5) maxCalls = Math.max(5, Math.floor(shownCalls.length / 2));
    else if (keep > 1) keep -= 1;
    else if (maxDecisions > 3 && shownDecisions.length > 3) maxDecisions = Math.max(3, Math.floor(shownDecisions.length / 2));
    else if (maxCalls > 0 && shownCalls.length > 0) maxCalls = 0;
    else if (!Number.isFinite(outputCap) || outputCap > MIN_KEPT_OUTPUT_CHARS) outputCap = Number.isFinite(outputCap) ? Math.max(MIN_KEPT_OUTPUT_CHARS, Math.floor(outputCap / 2)) : 4_000;
    else if (maxDecisions > 0 && shownDecisions.length > 0) maxDecisions = 0;
    // Nothing left to shrink: the plan and todo list alone are over the budget. Sent anyway; the caller sees the size.
    else return { messages: out, summary: { omittedMessages: cut - 1, keptToolResults: kept.reduce((n, g) => n + g.toolResults, 0), tokens } };
  }
}

export type ContextBudget = {
  /** The model's context window in tokens (lib/ai/providers.ts contextWindowOf, or the run's context.window). */
  window: number;
  /** The share of the window a prompt may fill before the conversation is summarised (0.2–0.95). */
  summariseAt: number;
  /** Tool results kept verbatim at the end of a summarised conversation. */
  keepToolResults: number;
};

export type PromptInfo = {
  /** The prompt's estimated tokens (system, tools, messages) and the budget it must stay within. */
  tokens: number;
  budget: number;
  /** Set when the conversation was summarised for this turn. */
  summarised: { omittedMessages: number; keptToolResults: number } | null;
};

/** The tokens the tool definitions take in every prompt (names, descriptions, input schemas as JSON schema). */
function toolTokens(tools: Record<string, { description?: string; inputSchema?: unknown }>): number {
  const defs = Object.entries(tools).map(([name, t]) => {
    let schema: unknown = null;
    try {
      schema = z.toJSONSchema(t.inputSchema as z.ZodType);
    } catch {
      schema = null;
    }
    return { name, description: t.description, parameters: schema };
  });
  return estimateTokens(JSON.stringify(defs));
}

/** The messages this turn sends: the whole conversation, or summarised to stay within the context budget. */
export function promptFor({
  state,
  system,
  tools,
  contextBudget,
}: {
  state: { messages: ModelMessage[]; todos: Todo[] };
  system: string;
  tools: Record<string, { description?: string; inputSchema?: unknown }>;
  contextBudget?: ContextBudget;
}): { messages: ModelMessage[]; info: PromptInfo } {
  const fixed = estimateTokens(system) + toolTokens(tools);
  if (!contextBudget) {
    const tokens = fixed + conversationTokens(state.messages);
    return { messages: state.messages, info: { tokens, budget: Number.POSITIVE_INFINITY, summarised: null } };
  }
  const budget = Math.floor(contextBudget.window * contextBudget.summariseAt);
  const bounded = boundConversation({
    messages: state.messages,
    todos: state.todos,
    budgetTokens: Math.max(0, budget - fixed),
    keepToolResults: contextBudget.keepToolResults,
  });
  return {
    messages: bounded.messages,
    info: {
      tokens: fixed + conversationTokens(bounded.messages),
      budget,
      summarised: bounded.summary ? { omittedMessages: bounded.summary.omittedMessages, keptToolResults: bounded.summary.keptToolResults } : null,
    },
  };
}
