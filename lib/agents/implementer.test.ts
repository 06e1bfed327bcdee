import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { answerClarification, applyReplanDecision, implementerTurn, startImplementer, type ImplementerState, type ImplementerTurnResult } from "@/lib/agents/implementer";
import { createScriptedModel, type ScriptedReply } from "@/lib/ai/scripted-model";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";
import { planOf } from "@/tests/agents/helpers/plan";

type Sbx = Awaited<ReturnType<typeof createTempSandbox>>;
let sandbox: Sbx;
beforeEach(async () => {
  sandbox = await createTempSandbox({ "src/app.ts": "export const version = 1;\n" });
});
afterEach(() => sandbox.destroy());

/** A model that replays a fixed list of turns, recording what it was sent. */
function script(turns: ScriptedReply[]) {
  const seen: LanguageModelV3CallOptions[] = [];
  const model = createScriptedModel({
    respond: (options) => {
      seen.push(options);
      return turns[Math.min(seen.length - 1, turns.length - 1)]!;
    },
  });
  return { model, seen };
}

async function drive(state: ImplementerState, model: ReturnType<typeof script>["model"], maxTurns = 40) {
  const results: ImplementerTurnResult[] = [];
  for (let i = 0; i < maxTurns; i++) {
    const r = await implementerTurn({ state, sandbox, modelId: "demo:scripted", model, context: { stepKey: `impl-${crypto.randomUUID()}` } });
    results.push(r);
    state = r.state;
    if (r.kind !== "continue") break;
  }
  return results;
}

const call = (toolName: string, input: unknown) => ({ toolName, input });
const threeTodos = planOf({
  tasks: [
    { id: "T1", files: ["src/a.ts"] },
    { id: "T2", files: ["src/b.ts"], dependsOn: ["T1"] },
    { id: "T3", files: ["src/app.ts"], dependsOn: ["T2"] },
  ],
});

describe("implementer", () => {
  it("completes three todos, in progress → done, then finishes with a summary", async () => {
    const { model, seen } = script([
      { toolCalls: [call("update_todo", { id: "T1", status: "in_progress" }), call("write_file", { path: "src/a.ts", content: "export const a = 1;\n" })] },
      { toolCalls: [call("update_todo", { id: "T1", status: "done" }), call("update_todo", { id: "T2", status: "in_progress" })] },
      { toolCalls: [call("write_file", { path: "src/b.ts", content: "export const b = 2;\n" }), call("update_todo", { id: "T2", status: "done" })] },
      { toolCalls: [call("edit_file", { path: "src/app.ts", search: "version = 1", replace: "version = 2" })] },
      { toolCalls: [call("run_command", { command: "cat", args: ["src/app.ts"] }), call("update_todo", { id: "T3", status: "done" })] },
      { text: "Added a.ts and b.ts and bumped the version." },
    ]);
    const results = await drive(startImplementer({ plan: threeTodos, request: "Do three things" }), model);
    const last = results.at(-1)!;
    expect(last).toMatchObject({ kind: "done", summary: "Added a.ts and b.ts and bumped the version." });
    expect(last.state.todos.map((t) => t.status)).toEqual(["done", "done", "done"]);
    expect(results[0]!.state.todos.map((t) => t.status)).toEqual(["in_progress", "pending", "pending"]);
    expect(last.state.filesChanged.sort()).toEqual(["src/a.ts", "src/app.ts", "src/b.ts"]);
    expect(await sandbox.readFile("src/app.ts")).toBe("export const version = 2;\n");
    expect(sandbox.execCalls).toEqual([["cat", "src/app.ts"]]);
    // The state survives a JSON round trip (it is stored by a durable step) and the model saw the todo list.
    expect(JSON.parse(JSON.stringify(last.state))).toEqual(last.state);
    expect(JSON.stringify(seen[0]!.prompt)).toContain("<todos>");
  });

  it("nudges a model that stops with todos open; kept stopping, it is nudged, firmly reminded, then stopped", async () => {
    const { model, seen } = script([{ text: "I think I am done." }]);
    const results = await drive(startImplementer({ plan: threeTodos, request: "x" }), model);
    // Three stops each: a nudge (level 1), a firm reminder (level 2), then the session stops (level 3).
    expect(results.map((r) => r.kind)).toEqual([...Array(8).fill("continue"), "failure"]);
    expect(results.at(-1)).toMatchObject({ kind: "failure", reason: "no_progress" });
    const nudge = JSON.stringify(seen[1]!.prompt.at(-1));
    expect(nudge).toContain("these todos are still open");
    expect(nudge).toContain("T1");
    expect(results.at(-1)!.state.interventions!.map((i) => [i.level, i.reason])).toEqual([[1, "no_progress"], [2, "no_progress"], [3, "no_progress"]]);
  });

  it("detects a loop: the same call with the same arguments three times without progress, three times over", async () => {
    const { model } = script([{ toolCalls: [call("read_file", { path: "src/app.ts" })] }]);
    const results = await drive(startImplementer({ plan: threeTodos, request: "x" }), model);
    expect(results).toHaveLength(9);
    expect(results.at(-1)).toMatchObject({ kind: "failure", reason: "loop" });
    expect((results.at(-1) as { message: string }).message).toContain("read_file");
    expect(results.at(-1)!.state.interventions!.map((i) => i.level)).toEqual([1, 2, 3]);
  });

  it("does not mistake repeated test runs between edits for a loop", async () => {
    const test = call("run_command", { command: "true", args: [] });
    const { model } = script([
      { toolCalls: [test] },
      { toolCalls: [call("write_file", { path: "src/a.ts", content: "1" })] },
      { toolCalls: [test] },
      { toolCalls: [call("write_file", { path: "src/a.ts", content: "2" })] },
      { toolCalls: [test] },
      { toolCalls: [call("update_todo", { id: "T1", status: "done" }), call("update_todo", { id: "T2", status: "done" }), call("update_todo", { id: "T3", status: "done" })] },
      { text: "done" },
    ]);
    const results = await drive(startImplementer({ plan: threeTodos, request: "x" }), model);
    expect(results.at(-1)!.kind).toBe("done");
  });

  it("stops at the iteration limit", async () => {
    let n = 0;
    const model = createScriptedModel({ respond: () => ({ toolCalls: [call("write_file", { path: "src/a.ts", content: String(n++) })] }) });
    const results = await drive(startImplementer({ plan: threeTodos, request: "x", maxIterations: 4 }), model);
    expect(results).toHaveLength(5);
    expect(results.at(-1)).toMatchObject({ kind: "failure", reason: "iteration_limit" });
    // With one turn left it was nudged; at the limit it stopped.
    expect(results.at(-1)!.state.interventions!.map((i) => [i.level, i.reason])).toEqual([[1, "iteration_limit"], [3, "iteration_limit"]]);
  });

  it("refuses ../../etc/passwd, absolute paths and symlinks out, with an error the model sees", async () => {
    const fs = await import("node:fs/promises");
    await fs.symlink("/etc", `${sandbox.root}/escape`);
    const { model, seen } = script([
      {
        toolCalls: [
          call("read_file", { path: "../../etc/passwd" }),
          call("read_file", { path: "/etc/passwd" }),
          call("write_file", { path: "/tmp/gatehouse-owned.txt", content: "x" }),
          call("read_file", { path: "escape/passwd" }),
        ],
      },
      { text: "ok" },
    ]);
    const [first] = await drive(startImplementer({ plan: threeTodos, request: "x" }), model, 2);
    expect(first!.kind).toBe("continue");
    const toolMessage = first!.state.messages.at(-1)!;
    expect(toolMessage.role).toBe("tool");
    const outputs = (toolMessage.content as Array<{ output: { type: string; value: string } }>).map((p) => p.output);
    expect(outputs).toHaveLength(4);
    for (const o of outputs) {
      expect(o.type).toBe("error-text");
      expect(o.value).toContain("outside the workspace");
    }
    expect(outputs.map((o) => o.value).join()).not.toContain("root:");
    await expect(fs.access("/tmp/gatehouse-owned.txt")).rejects.toThrow();
    // And the next request carries those errors to the model.
    expect(JSON.stringify(seen[1]!.prompt)).toContain("outside the workspace");
  });

  it("asks a clarification, waits, and resumes with the answer as the tool result", async () => {
    const { model, seen } = script([
      { toolCalls: [call("request_clarification", { question: "Which colour?", options: ["red", "blue"] })] },
      { toolCalls: [call("write_file", { path: "src/a.ts", content: "blue" })] },
    ]);
    const start = startImplementer({ plan: threeTodos, request: "x" });
    const asked = await implementerTurn({ state: start, sandbox, modelId: "demo:scripted", model, context: {} });
    expect(asked).toMatchObject({ kind: "clarification", question: "Which colour?", options: ["red", "blue"], responseType: "single_choice" });
    // While waiting, another turn is a no-op that repeats the question (a replayed step is harmless).
    const again = await implementerTurn({ state: asked.state, sandbox, modelId: "demo:scripted", model, context: {} });
    expect(again.kind).toBe("clarification");
    expect(seen).toHaveLength(1);

    const resumed = answerClarification(JSON.parse(JSON.stringify(asked.state)), "blue");
    const next = await implementerTurn({ state: resumed, sandbox, modelId: "demo:scripted", model, context: {} });
    expect(next.kind).toBe("continue");
    expect(JSON.stringify(seen[1]!.prompt)).toContain('"answer":"blue"');
    expect(await sandbox.readFile("src/a.ts")).toBe("blue");
  });

  it("asks each response type: defaults from the options, multiple choice, file, and a choice without options as text", async () => {
    const ask = async (input: Record<string, unknown>) => {
      const { model } = script([{ toolCalls: [call("request_clarification", input)] }]);
      const r = await implementerTurn({ state: startImplementer({ plan: threeTodos, request: "x" }), sandbox, modelId: "demo:scripted", model, context: {} });
      if (r.kind !== "clarification") throw new Error(`expected a clarification, got ${r.kind}`);
      // The type survives the durable step's JSON round trip and is what a replayed (waiting) turn returns.
      const replayed = await implementerTurn({ state: JSON.parse(JSON.stringify(r.state)), sandbox, modelId: "demo:scripted", model, context: {} });
      expect(replayed).toMatchObject({ kind: "clarification", responseType: r.responseType, options: r.options });
      return { question: r.question, options: r.options, responseType: r.responseType };
    };
    expect(await ask({ question: "Name?" })).toEqual({ question: "Name?", options: [], responseType: "text" });
    expect(await ask({ question: "Colour?", options: ["red", "blue"] })).toEqual({ question: "Colour?", options: ["red", "blue"], responseType: "single_choice" });
    expect(await ask({ question: "Which parts?", options: ["api", "web", "docs"], responseType: "multiple_choice" })).toEqual({
      question: "Which parts?",
      options: ["api", "web", "docs"],
      responseType: "multiple_choice",
    });
    expect(await ask({ question: "Upload the spec", responseType: "file" })).toEqual({ question: "Upload the spec", options: [], responseType: "file" });
    // Options belong to choices: a file or free-text question drops them, and a choice with none becomes free text.
    expect(await ask({ question: "Spec?", options: ["a"], responseType: "file" })).toMatchObject({ options: [], responseType: "file" });
    expect(await ask({ question: "Why?", options: ["a"], responseType: "text" })).toMatchObject({ options: [], responseType: "text" });
    expect(await ask({ question: "Pick", options: [" "], responseType: "multiple_choice" })).toMatchObject({ options: [], responseType: "text" });
  });

  it("a multiple-choice or file answer reaches the model as the tool result", async () => {
    for (const [input, answer] of [
      [{ question: "Which parts?", options: ["api", "web", "docs"], responseType: "multiple_choice" }, "api, docs"],
      [{ question: "Upload the spec", responseType: "file" }, "File spec.md:\n# Spec\nJSON only."],
    ] as const) {
      const { model, seen } = script([{ toolCalls: [call("request_clarification", input)] }, { text: "ok" }]);
      const asked = await implementerTurn({ state: startImplementer({ plan: threeTodos, request: "x" }), sandbox, modelId: "demo:scripted", model, context: {} });
      expect(asked.kind).toBe("clarification");
      const resumed = answerClarification(JSON.parse(JSON.stringify(asked.state)), answer);
      expect(resumed).toMatchObject({ status: "running", pendingClarification: null });
      await implementerTurn({ state: resumed, sandbox, modelId: "demo:scripted", model, context: {} });
      expect(JSON.stringify(seen[1]!.prompt)).toContain(JSON.stringify({ question: input.question, answer }));
    }
  });

  it("an unknown response type is refused to the model as a tool error, not asked", async () => {
    const { model, seen } = script([
      { toolCalls: [call("request_clarification", { question: "Which?", responseType: "checkboxes" })] },
      { toolCalls: [call("request_clarification", { question: "Which?", options: ["a", "b"], responseType: "multiple_choice" })] },
    ]);
    const first = await implementerTurn({ state: startImplementer({ plan: threeTodos, request: "x" }), sandbox, modelId: "demo:scripted", model, context: {} });
    expect(first).toMatchObject({ kind: "continue", state: { status: "running", pendingClarification: null } });
    const error = first.state.messages.at(-1)!;
    expect(error.role).toBe("tool");
    expect(JSON.stringify(error.content)).toContain("responseType");
    const second = await implementerTurn({ state: first.state, sandbox, modelId: "demo:scripted", model, context: {} });
    expect(second).toMatchObject({ kind: "clarification", responseType: "multiple_choice", options: ["a", "b"] });
    expect(seen).toHaveLength(2);
  });

  it("a question stored before questions had a type keeps its old meaning (options → single choice)", async () => {
    const { model, seen } = script([{ text: "unused" }]);
    const legacy: ImplementerState = {
      ...startImplementer({ plan: threeTodos, request: "x" }),
      status: "awaiting_clarification",
      pendingClarification: { toolCallId: "call_0_0", question: "Colour?", options: ["red", "blue"], context: null },
    };
    const r = await implementerTurn({ state: legacy, sandbox, modelId: "demo:scripted", model, context: {} });
    expect(r).toMatchObject({ kind: "clarification", question: "Colour?", responseType: "single_choice" });
    expect(seen).toHaveLength(0);
  });

  it("edit_file refuses an ambiguous search, telling the model how to fix it", async () => {
    await sandbox.writeFile("src/dup.ts", "x\nx\n");
    const { model } = script([{ toolCalls: [call("edit_file", { path: "src/dup.ts", search: "x", replace: "y" })] }]);
    const [first] = await drive(startImplementer({ plan: threeTodos, request: "x" }), model, 1);
    const out = (first!.state.messages.at(-1)!.content as Array<{ output: { value: string } }>)[0]!.output.value;
    expect(out).toContain("occurs 2 times");
    expect(await sandbox.readFile("src/dup.ts")).toBe("x\nx\n");
  });
});

describe("reflection and re-planning (PAOR)", () => {
  it("records progress per todo, and a proposed re-plan ends the turn until decided; refused, the todos stay and the model is told", async () => {
    const plan = planOf({ tasks: [{ id: "T1", title: "one", files: ["a.txt"] }] });
    const { model, seen } = script([
      {
        toolCalls: [
          call("update_todo", { id: "T1", status: "in_progress" }),
          call("record_progress", { taskId: "T1", progress: 0.5, changed: "Half of a.txt." }),
          call("propose_replan", { observation: "a.txt is generated", proposal: "Edit its generator instead." }),
        ],
      },
      { text: "unused" },
    ]);
    const [r] = await drive(startImplementer({ plan, request: "r" }), model, 1);
    expect(r).toMatchObject({ kind: "replan", observation: "a.txt is generated", proposal: "Edit its generator instead." });
    expect(r!.state.reflections).toEqual([{ taskId: "T1", progress: 0.5, changed: "Half of a.txt." }]);
    // Still pending: another turn makes no model call.
    const again = await implementerTurn({ state: r!.state, sandbox, modelId: "demo:scripted", model, context: { stepKey: "x" } });
    expect(again.kind).toBe("replan");
    expect(seen).toHaveLength(1);

    const refused = applyReplanDecision(r!.state, { approved: false, plan: null, notes: "Keep it simple." });
    expect(refused.pendingReplan).toBeNull();
    expect(refused.todos).toEqual(r!.state.todos);
    expect(JSON.stringify(refused.messages.at(-1))).toContain("The re-plan was not approved. Go on with the approved plan. Note: Keep it simple.");

    const next = planOf({ tasks: [{ id: "T1", title: "one", files: ["a.txt"] }, { id: "T2", title: "generator", files: ["gen.ts"] }] });
    const approved = applyReplanDecision(r!.state, { approved: true, plan: next, notes: null });
    expect(approved.todos.map((t) => [t.id, t.status])).toEqual([["T1", "pending"], ["T2", "pending"]]);
  });
});
