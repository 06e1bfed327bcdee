import type { ModelMessage } from "ai";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createScriptedModel, estimateTokens, promptText } from "@/lib/ai/scripted-model";
import { contextWindowOf } from "@/lib/ai/providers";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";
import { planOf } from "@/tests/agents/helpers/plan";
import { boundConversation, conversationTokens } from "./context";
import { implementerTurn, startImplementer, type ImplementerState, type PromptInfo } from "./implementer";
import type { Todo } from "./tools";

const PLAN_TEXT = "<plan>\nSummary: add 200 files\nTasks:\n- T1: write the files\n- T2: document them\n</plan>";
const todos: Todo[] = [
  { id: "T1", title: "write the files", status: "in_progress" },
  { id: "T2", title: "document them", status: "pending" },
];

/** A conversation of `turns` tool turns after the plan message, each a write and its (long) result. */
function conversation(turns: number, { resultChars = 400 } = {}): ModelMessage[] {
  const messages: ModelMessage[] = [{ role: "user", content: PLAN_TEXT }];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: "assistant", content: [{ type: "tool-call", toolCallId: `c${i}`, toolName: "run_command", input: { command: "echo", args: [String(i)] } }] });
    messages.push({
      role: "tool",
      content: [{ type: "tool-result", toolCallId: `c${i}`, toolName: "run_command", output: { type: "json", value: { exitCode: 0, stdout: `out-${i} ${"x".repeat(resultChars)}` } } }],
    });
    if (i === 3) messages.push({ role: "user", content: "Ada approved: rm -rf build (run_command). Do it now, exactly as before." });
  }
  return messages;
}

/** Every tool result in the messages answers a call made earlier in the same messages (a provider refuses otherwise). */
function pairingHolds(messages: ModelMessage[]): boolean {
  const calls = new Set<string>();
  for (const m of messages) {
    if (m.role === "assistant" && Array.isArray(m.content)) for (const p of m.content) if (p.type === "tool-call") calls.add(p.toolCallId);
    if (m.role === "tool") for (const p of m.content) if (p.type === "tool-result" && !calls.has(p.toolCallId)) return false;
  }
  return true;
}

describe("boundConversation", () => {
  it("sends a conversation that fits as it is", () => {
    const messages = conversation(3);
    expect(boundConversation({ messages, todos, budgetTokens: 100_000, keepToolResults: 2 })).toEqual({ messages, summary: null });
  });

  it("past the budget: the plan verbatim, the todo list, the decisions, the last N tool results verbatim, the rest as references", () => {
    const messages = conversation(50);
    expect(conversationTokens(messages)).toBeGreaterThan(3_000);
    const bounded = boundConversation({ messages, todos, budgetTokens: 3_000, keepToolResults: 3 });
    expect(conversationTokens(bounded.messages)).toBeLessThanOrEqual(3_000);
    expect(bounded.summary).toMatchObject({ keptToolResults: 3 });
    const first = bounded.messages[0]!.content as string;
    expect(first.startsWith(PLAN_TEXT)).toBe(true);
    expect(first).toContain('- T1 "write the files": in_progress');
    expect(first).toContain('- T2 "document them": pending');
    // A person's decision survives verbatim, with its message number.
    expect(first).toContain("#9 Ada approved: rm -rf build (run_command). Do it now, exactly as before.");
    // Older tool calls are one line each with the number of their stored output.
    expect(first).toMatch(/#\d+ run_command echo 46: exit 0/);
    // The last three results are verbatim, and every kept result still follows its call.
    const tail = JSON.stringify(bounded.messages.slice(1));
    for (const i of [47, 48, 49]) expect(tail).toContain(`out-${i} ${"x".repeat(400)}`);
    expect(tail).not.toContain("out-46 ");
    expect(pairingHolds(bounded.messages)).toBe(true);
  });

  it("keeps fewer verbatim results, then cuts a kept output to its end, when even those do not fit", () => {
    const messages = conversation(10, { resultChars: 20_000 });
    const bounded = boundConversation({ messages, todos, budgetTokens: 2_000, keepToolResults: 4 });
    expect(conversationTokens(bounded.messages)).toBeLessThanOrEqual(2_000);
    expect(bounded.summary!.keptToolResults).toBe(1);
    expect(JSON.stringify(bounded.messages)).toMatch(/output cut to its last \d+ of \d+ characters; recall_output 21 reads it whole/);
    expect(pairingHolds(bounded.messages)).toBe(true);
  });
});

describe("the provider registry's context windows", () => {
  it("knows a window per model by prefix, a default per provider, and the run's override wins", () => {
    expect(contextWindowOf("anthropic:claude-sonnet-4-5")).toBe(200_000);
    expect(contextWindowOf("openai:gpt-4.1-mini")).toBe(1_047_576);
    expect(contextWindowOf("openai:some-new-model")).toBe(128_000);
    expect(contextWindowOf("openai-compatible:llama3.1:8b")).toBe(32_768);
    expect(contextWindowOf("openai-compatible:llama3.1:8b", 4_096)).toBe(4_096);
  });
});

describe("a 200-turn session under a small context budget", () => {
  type Sbx = Awaited<ReturnType<typeof createTempSandbox>>;
  let sandbox: Sbx;
  beforeEach(async () => {
    sandbox = await createTempSandbox({ "README.md": "# r\n" });
  });
  afterEach(() => sandbox.destroy());

  it("is summarised, every prompt stays within the budget, and the plan and todo list are intact after summarising", { timeout: 120_000 }, async () => {
    const plan = planOf({ tasks: [{ id: "T1", files: ["out"] }, { id: "T2", files: ["docs"] }] });
    const seen: LanguageModelV3CallOptions[] = [];
    const TURNS = 200;
    const model = createScriptedModel({
      respond: (options) => {
        seen.push(options);
        const n = seen.length;
        if (n === 1) return { toolCalls: [{ toolName: "update_todo", input: { id: "T1", status: "in_progress" } }] };
        if (n < TURNS - 2) return { toolCalls: [{ toolName: "write_file", input: { path: `out/f${n}.txt`, content: `file ${n} ${"y".repeat(300)}\n` } }] };
        if (n === TURNS - 2) return { toolCalls: [{ toolName: "update_todo", input: { id: "T1", status: "done" } }, { toolName: "update_todo", input: { id: "T2", status: "in_progress" } }] };
        if (n === TURNS - 1) return { toolCalls: [{ toolName: "update_todo", input: { id: "T2", status: "done" } }] };
        return { text: "Wrote 196 files." };
      },
    });
    const contextBudget = { window: 8_000, summariseAt: 0.7, keepToolResults: 4 };
    const infos: PromptInfo[] = [];
    let state: ImplementerState = startImplementer({ plan, request: "Write many files", maxIterations: TURNS });
    const planMessage = state.messages[0]!.content as string;
    for (let i = 0; i < TURNS; i++) {
      const r = await implementerTurn({ state, sandbox, modelId: "demo:scripted", model, context: {}, contextBudget, onPrompt: (info) => infos.push(info) });
      state = r.state;
      if (r.kind === "done") break;
      expect(r.kind).toBe("continue");
    }
    expect(seen).toHaveLength(TURNS);
    expect(state.status).toBe("done");
    // The conversation itself is whole: every turn's messages are still in the state (stored outside the prompt).
    expect(state.messages.length).toBeGreaterThan(2 * (TURNS - 1));

    const budget = 5_600;
    expect(infos.every((i) => i.budget === budget)).toBe(true);
    const summarisedAt = infos.findIndex((i) => i.summarised);
    expect(summarisedAt).toBeGreaterThan(0);
    expect(summarisedAt).toBeLessThan(40);
    for (const [n, options] of seen.entries()) {
      // What the model was really sent (the scripted model sees the AI SDK's prompt and tool definitions).
      const sent = estimateTokens(JSON.stringify(options.prompt)) + estimateTokens(JSON.stringify(options.tools ?? []));
      expect(sent, `turn ${n}`).toBeLessThanOrEqual(budget);
      expect(infos[n]!.tokens, `turn ${n}`).toBeLessThanOrEqual(budget);
    }
    // After summarising: the plan verbatim and the todo list as it stood, on every later turn.
    for (const options of seen.slice(summarisedAt)) {
      const text = promptText(options.prompt);
      expect(text).toContain(planMessage);
      expect(text).toContain("<conversation-summary>");
    }
    const late = promptText(seen[TURNS - 3]!.prompt);
    expect(late).toMatch(/- T1 "[^"]+": in_progress/);
    expect(late).toMatch(/- T2 "[^"]+": pending/);
    const last = promptText(seen[TURNS - 2]!.prompt);
    expect(last).toMatch(/- T1 "[^"]+": done/);
    expect(last).toMatch(/- T2 "[^"]+": in_progress/);
  });

  it("recall_output reads a summarised-away tool output whole from the stored conversation", async () => {
    const plan = planOf({ tasks: [{ id: "T1", files: ["out"] }] });
    const base = startImplementer({ plan, request: "r" });
    const big = `BEGIN ${"z".repeat(5_000)} END`;
    const state: ImplementerState = {
      ...base,
      messages: [
        ...base.messages,
        { role: "assistant", content: [{ type: "tool-call", toolCallId: "old", toolName: "run_command", input: { command: "cat", args: ["log"] } }] },
        { role: "tool", content: [{ type: "tool-result", toolCallId: "old", toolName: "run_command", output: { type: "json", value: { exitCode: 0, stdout: big } } }] },
      ],
    };
    const seen: LanguageModelV3CallOptions[] = [];
    const model = createScriptedModel({
      respond: (options) => {
        seen.push(options);
        return { toolCalls: [{ toolName: "recall_output", input: { message: 2 } }] };
      },
    });
    const r = await implementerTurn({ state, sandbox, modelId: "demo:scripted", model, context: {} });
    const result = JSON.stringify(r.state.messages.at(-1));
    expect(result).toContain("BEGIN");
    expect(result).toContain("END");
    expect(result.length).toBeGreaterThan(5_000);
  });
});
