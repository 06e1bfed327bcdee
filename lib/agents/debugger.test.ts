import { describe, expect, it } from "vitest";
import { createScriptedModel } from "@/lib/ai/scripted-model";
import { debugPrompt, parseDebugVerdict, runDebugger } from "./debugger";

const failure = { taskId: "T1", command: "sh test-add.sh", exitCode: 1, output: "FAIL: add 2 2 gave 0, expected 4" };

describe("parseDebugVerdict (the model's answer is untrusted)", () => {
  it("reads a well-formed verdict as is", () => {
    expect(parseDebugVerdict({ category: "test", action: "fix", reason: "The sum is wrong.", question: null })).toEqual({
      category: "test",
      action: "fix",
      reason: "The sum is wrong.",
      question: null,
      parsed: true,
    });
  });

  it("reads the JSON out of a code fence or prose, and maps synonyms and case", () => {
    const fenced = 'Here you go:\n```json\n{"category": "Build", "action": "RETRY", "reason": "tsc fails"}\n```';
    expect(parseDebugVerdict(fenced)).toMatchObject({ category: "compile", action: "fix", reason: "tsc fails", parsed: true });
    expect(parseDebugVerdict('I think {"category":"tests","action":"fix","reason":"x"} is it.')).toMatchObject({ category: "test", action: "fix" });
  });

  it("a plan problem always escalates, whatever action the model chose", () => {
    expect(parseDebugVerdict({ category: "plan", action: "fix", reason: "The check tests another file." })).toMatchObject({ category: "plan", action: "escalate" });
  });

  it("an ask without a question escalates; a question is dropped from any other action", () => {
    expect(parseDebugVerdict({ category: "environment", action: "ask", reason: "No docker." })).toMatchObject({ action: "escalate", question: null });
    expect(parseDebugVerdict({ category: "environment", action: "ask", reason: "No docker.", question: "Can you install docker?" })).toMatchObject({
      action: "ask",
      question: "Can you install docker?",
    });
    expect(parseDebugVerdict({ category: "test", action: "fix", reason: "r", question: "why?" })).toMatchObject({ question: null });
  });

  it("a missing action gets the category's default", () => {
    expect(parseDebugVerdict({ category: "environment", question: "Install jq?" })).toMatchObject({ action: "ask" });
    expect(parseDebugVerdict({ category: "compile" })).toMatchObject({ action: "fix", reason: "Classified as compile." });
  });

  it("garbage, an unknown category or a non-object becomes the safe default: escalate to a person", () => {
    for (const raw of ["not json at all", "[1,2]", "", null, 42, { category: "cosmic-rays", action: "fix" }, { action: "fix" }, '{"category": 7}']) {
      const verdict = parseDebugVerdict(raw);
      expect(verdict).toMatchObject({ action: "escalate", parsed: false });
      expect(verdict.reason).toMatch(/could not be read/);
    }
  });

  it("bounds and redacts what it keeps: a huge reason is cut, a secret in it never survives", () => {
    const verdict = parseDebugVerdict({ category: "test", action: "fix", reason: `${"x".repeat(5_000)} sk-ant-api03-${"a".repeat(40)}` });
    expect(verdict.reason.length).toBeLessThanOrEqual(1_000);
    const secret = parseDebugVerdict({ category: "test", action: "fix", reason: `token ghp_${"b".repeat(36)} leaked` });
    expect(secret.reason).not.toContain("ghp_bbbb");
  });
});

describe("runDebugger", () => {
  it("sends the failing command's output and classifies through the AI SDK's structured output", async () => {
    let seen = "";
    const model = createScriptedModel({
      respond: (options) => {
        seen = JSON.stringify(options.prompt);
        return { text: JSON.stringify({ category: "test", action: "fix", reason: "add subtracts.", question: null }) };
      },
    });
    const verdict = await runDebugger({ failure, task: { id: "T1", title: "Add" }, attempt: 1, modelId: "demo:test", model, context: {} });
    expect(verdict).toMatchObject({ category: "test", action: "fix", parsed: true });
    expect(seen).toContain("FAIL: add 2 2 gave 0, expected 4");
    expect(seen).toContain("sh test-add.sh");
  });

  it("a reply that is not the schema is read leniently instead of failing the run", async () => {
    const model = createScriptedModel({ respond: () => ({ text: 'Sure! ```json\n{"category":"TEST","action":"fix","reason":"off by one"}\n```' }) });
    const verdict = await runDebugger({ failure, task: { id: "T1", title: "Add" }, attempt: 1, modelId: "demo:test", model, context: {} });
    expect(verdict).toMatchObject({ category: "test", action: "fix", reason: "off by one", parsed: true });
  });

  it("keeps only the tail of a long output in the prompt", () => {
    const prompt = debugPrompt({ failure: { ...failure, output: `${"noise\n".repeat(5_000)}the real error` }, task: { id: "T1", title: "Add" }, attempt: 2 });
    expect(prompt).toContain("the real error");
    expect(prompt.length).toBeLessThan(6_000);
  });
});
