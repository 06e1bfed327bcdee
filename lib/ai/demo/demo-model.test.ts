import { streamText } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { answerClarification, implementerTurn, startImplementer, type ImplementerState } from "@/lib/agents/implementer";
import { PlannerError, runPlanner, type PlannerInput } from "@/lib/agents/planner";
import { runValidator } from "@/lib/agents/validator";
import type { Plan } from "@/lib/agents/plan";
import { getLanguageModel } from "@/lib/ai/providers";
import { parseInstructions } from "@/lib/ai/demo/instructions";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";

const DEMO = "demo:default";
type Sbx = Awaited<ReturnType<typeof createTempSandbox>>;
let sandbox: Sbx;
let run = 0;
let runKey: string;
beforeEach(async () => {
  sandbox = await createTempSandbox();
  runKey = `demo-run-${++run}`;
});
afterEach(() => sandbox.destroy());

async function plan(input: PlannerInput, key = "plan"): Promise<ReturnType<typeof runPlanner>> {
  return runPlanner({ input, modelId: DEMO, context: { stepKey: `${runKey}:${key}` } });
}

/**
 * Drive the implementer turn by turn as the workflow would, answering questions with `answer` (or, per question, with
 * what `answer` returns: the text the workflow gives the agent).
 */
async function implement(p: Plan, request: string, answer?: string | ((question: string) => string)) {
  let state: ImplementerState = startImplementer({ plan: p, request });
  const questions: Array<{ question: string; options: string[]; responseType: string }> = [];
  for (let i = 0; i < 30; i++) {
    const r = await implementerTurn({ state, sandbox, modelId: DEMO, context: { stepKey: `${runKey}:impl:${i}` } });
    state = JSON.parse(JSON.stringify(r.state));
    if (r.kind === "clarification") {
      questions.push({ question: r.question, options: r.options, responseType: r.responseType });
      state = answerClarification(state, typeof answer === "function" ? answer(r.question) : answer);
      continue;
    }
    if (r.kind !== "continue") return { result: r, questions, turns: i + 1 };
  }
  throw new Error("the demo implementer did not finish");
}

async function validate(p: Plan, request: string, attempt: number) {
  return runValidator({ plan: p, request, sandbox, attempt, modelId: DEMO, context: { stepKey: `${runKey}:validate:${attempt}` } });
}

describe("demo model: a full planner → implementer → validator pass", () => {
  it("with no instructions: one task, a note file describing the request, validation passes", async () => {
    const request = "Add a dark mode toggle to the settings page";
    const planned = await plan({ request });
    if (planned.kind !== "plan") throw new Error("expected a plan");
    expect(planned.plan.tasks).toEqual([
      expect.objectContaining({ id: "T1", files: ["docs/requests/add-a-dark-mode-toggle-to-the-settings-page.md"] }),
    ]);
    expect(planned.plan.constraints.requiredRoutes).toContain("Write the request note");

    const { result } = await implement(planned.plan, request);
    expect(result.kind).toBe("done");
    const note = await sandbox.readFile("docs/requests/add-a-dark-mode-toggle-to-the-settings-page.md");
    expect(note).toContain("Add a dark mode toggle to the settings page");
    expect(note).toContain("demo model");

    const v = await validate(planned.plan, request, 1);
    expect(v).toMatchObject({ passed: true, alignmentScore: 10, outOfScopeFiles: [] });
    expect(v.checks.every((c) => c.passed)).toBe(true);

    // Every call was recorded with demo token usage (free).
    const db = await getDb();
    const rows = (await db.select().from(modelCalls)).filter((r) => r.stepKey?.startsWith(`${runKey}:`));
    expect(new Set(rows.map((r) => r.stage))).toEqual(new Set(["planning", "implementation", "validation"]));
    for (const row of rows) {
      expect(row.model).toBe(DEMO);
      expect(row.tokensIn).toBeGreaterThan(0);
      expect(row.tokensOut).toBeGreaterThan(0);
      expect(row.costUsd).toBe(0);
    }
  });

  it("follows every §6 instruction: files, plan-ask, ask, invalid-mermaid, fail-validation", async () => {
    const request = [
      "Greeting module",
      "[plan-ask: Which greeting should we use?]",
      "[ask: Which language? | English | French]",
      "[invalid-mermaid: 1]",
      "[fail-validation: 1]",
      "```file:src/greet.ts",
      'export const greet = (name: string) => `Hello, ${name}!`;',
      "```",
      "```file:src/index.ts",
      'export { greet } from "./greet";',
      "```",
    ].join("\n");

    const asked = await plan({ request });
    expect(asked).toMatchObject({ kind: "clarification", question: "Which greeting should we use?", responseType: "text" });

    const planned = await plan({ request, clarifications: [{ question: "Which greeting should we use?", answer: "Hello" }] }, "plan-2");
    if (planned.kind !== "plan") throw new Error("expected a plan");
    // The first diagram was invalid on purpose; the planner retried with the parser's message.
    expect(planned.diagramsProduced).toBe(2);
    expect(planned.plan.tasks.map((t) => t.files)).toEqual([["src/greet.ts"], ["src/index.ts"], ["docs/requests/greeting-module.md"]]);
    expect(planned.plan.acceptanceCriteria.map((c) => c.command)).toEqual([
      "test -f src/greet.ts",
      "test -f src/index.ts",
      "test -f docs/requests/greeting-module.md",
    ]);

    const { result, questions } = await implement(planned.plan, request, "French");
    expect(questions).toEqual([{ question: "Which language?", options: ["English", "French"], responseType: "single_choice" }]);
    expect(result.kind).toBe("done");
    expect(result.state.todos.every((t) => t.status === "done")).toBe(true);
    expect(await sandbox.readFile("src/greet.ts")).toBe('export const greet = (name: string) => `Hello, ${name}!`;\n');
    expect(await sandbox.readFile("src/index.ts")).toBe('export { greet } from "./greet";\n');
    const note = await sandbox.readFile("docs/requests/greeting-module.md");
    expect(note).toContain("**Which language?** — French");
    expect(note).not.toContain("[ask:");

    const first = await validate(planned.plan, request, 1);
    expect(first.passed).toBe(false);
    expect(first.findings).toEqual([expect.objectContaining({ severity: "minor" })]);
    expect(first.report).toContain("**Result:** failed");
    const second = await validate(planned.plan, request, 2);
    expect(second.passed).toBe(true);
    expect(second.changedFiles).toEqual(["docs/requests/greeting-module.md", "src/greet.ts", "src/index.ts"]);
  });

  it("[run:] runs each command line once, in order, through run_command; [check:] becomes an acceptance command", async () => {
    const request = [
      "Build it",
      "[run: echo one > one.txt]",
      "[run: cat one.txt]",
      "[run: test -f one.txt && [ -s one.txt ] && echo ok > ok.txt]",
      "[check: test -s ok.txt]",
      "[check: grep -q one one.txt]",
    ].join("\n");
    const ins = parseInstructions(request);
    expect(ins.runs).toEqual(["echo one > one.txt", "cat one.txt", "test -f one.txt && [ -s one.txt ] && echo ok > ok.txt"]);
    expect(ins.checks).toEqual(["test -s ok.txt", "grep -q one one.txt"]);
    expect(ins.description).toBe("Build it");

    const planned = await plan({ request });
    if (planned.kind !== "plan") throw new Error("expected a plan");
    expect(planned.plan.acceptanceCriteria.map((c) => c.command)).toEqual([
      "test -f docs/requests/build-it.md",
      "test -s ok.txt",
      "grep -q one one.txt",
    ]);
    const { result } = await implement(planned.plan, request);
    expect(result.kind).toBe("done");
    // Each command ran once, in request order, as a model's run_command would (shell syntax → sh -c).
    expect(sandbox.execCalls).toEqual([
      ["sh", "-c", "echo one > one.txt"],
      ["cat", "one.txt"],
      ["sh", "-c", "test -f one.txt && [ -s one.txt ] && echo ok > ok.txt"],
    ]);
    expect(await sandbox.readFile("ok.txt")).toBe("ok\n");
    const validation = await validate(planned.plan, request, 1);
    expect(validation.checks.map((c) => c.passed)).toEqual([true, true, true]);
  });

  it("generated acceptance commands quote file paths, so a file name never becomes shell syntax", async () => {
    const request = ["Odd names", "```file:docs/$(id);touch-pwned.md", "x", "```"].join("\n");
    const planned = await plan({ request });
    if (planned.kind !== "plan") throw new Error("expected a plan");
    expect(planned.plan.acceptanceCriteria[0]!.command).toBe("test -f 'docs/$(id);touch-pwned.md'");
  });

  it("[ask-multi:] asks one multiple choice and [ask-file:] one file; both answers land in the note", async () => {
    const request = ["Split the app", "[ask-multi: Which parts? | api | web | docs]", "[ask-file: Upload the spec]", "[ask: Why?]"].join("\n");
    const planned = await plan({ request });
    if (planned.kind !== "plan") throw new Error("expected a plan");
    const spec = ["# Spec", "", ...Array.from({ length: 14 }, (_, i) => `Line ${i + 1}`)].join("\n");
    const answers: Record<string, string> = {
      // What the workflow hands the agent: choices joined, a file as "File <name>:\n<content>".
      "Which parts?": "api, docs",
      "Upload the spec": `File spec.md:\n${spec}\n`,
      "Why?": "Because",
    };
    const { result, questions } = await implement(planned.plan, request, (q) => answers[q]!);
    expect(questions).toEqual([
      { question: "Which parts?", options: ["api", "web", "docs"], responseType: "multiple_choice" },
      { question: "Upload the spec", options: [], responseType: "file" },
      { question: "Why?", options: [], responseType: "text" },
    ]);
    expect(result.kind).toBe("done");
    const note = await sandbox.readFile("docs/requests/split-the-app.md");
    expect(note).toContain("- **Which parts?** — api, docs\n");
    // The file: its name and first ten lines, quoted; the rest is left out.
    expect(note).toContain("- **Upload the spec** — file `spec.md` (first 10 of 16 lines):\n\n  > # Spec\n  >\n  > Line 1\n");
    expect(note).toContain("  > Line 8\n\n");
    expect(note).not.toContain("Line 9");
    expect(note).toContain("- **Why?** — Because\n");
    expect(note).not.toMatch(/\[ask/);
  });

  it("a short file is quoted whole; an answer that is not a file (an escalation's notes) is kept as text", async () => {
    const request = "Docs\n[ask-file: Upload the spec]";
    const planned = await plan({ request });
    if (planned.kind !== "plan") throw new Error("expected a plan");
    await implement(planned.plan, request, "File notes.txt:\nonly line");
    expect(await sandbox.readFile("docs/requests/docs.md")).toContain("- **Upload the spec** — file `notes.txt`:\n\n  > only line\n");
    await implement(planned.plan, request, "No file; use the README");
    expect(await sandbox.readFile("docs/requests/docs.md")).toContain("- **Upload the spec** — No file; use the README\n");
  });

  it("[invalid-mermaid: 2] ends planning in a typed failure; the next planning attempt succeeds", async () => {
    const request = "Checkout flow\n[invalid-mermaid: 2]";
    const error = await plan({ request }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PlannerError);
    expect((error as PlannerError).code).toBe("bad_request:mermaid");
    expect((error as PlannerError).diagramsProduced).toBe(2);
    const again = await plan({ request, diagramAttempt: 2 }, "plan-after-fix");
    expect(again.kind).toBe("plan");
  });

  it("[loop: 1]: the first session repeats one read until it is stopped; a session begun with feedback finishes", async () => {
    const request = "Loop for a while\n[loop: 1]";
    const planned = await plan({ request });
    if (planned.kind !== "plan") throw new Error("expected a plan");
    const first = await implement(planned.plan, request);
    expect(first.result).toMatchObject({ kind: "failure", reason: "loop" });
    expect(first.turns).toBe(9);
    expect(first.result.state.interventions?.map((i) => i.level)).toEqual([1, 2, 3]);
    let state: ImplementerState = startImplementer({ plan: planned.plan, request, feedback: "A person's note: write the note." });
    for (let i = 0; i < 10 && state.status === "running"; i++) {
      state = (await implementerTurn({ state, sandbox, modelId: DEMO, context: { stepKey: `${runKey}:retry:${i}` } })).state;
    }
    expect(state.status).toBe("done");
    expect(await sandbox.readFile("docs/requests/loop-for-a-while.md")).toContain("Loop for a while");
  });

  it("streams like any provider and is labelled demo", async () => {
    const model = getLanguageModel(DEMO);
    expect(model).toMatchObject({ provider: "demo", modelId: "default" });
    const r = streamText({ model, prompt: "<request>\nHello there\n</request>" });
    expect(await r.text).toBe("Demo model (scripted, not AI). Request: Hello there");
    expect((await r.totalUsage).outputTokens).toBeGreaterThan(0);
  });
});

describe("demo instruction syntax", () => {
  it("parses markers and file blocks and strips them from the description", () => {
    const ins = parseInstructions(
      "# Fix: the login   bug!\n[ask: Free text?]\n[fail-validation: 3]\n~~~file:a/b.txt\nline\n~~~\nrest",
    );
    expect(ins).toMatchObject({
      title: "Fix: the login   bug!",
      slug: "fix-the-login-bug",
      notePath: "docs/requests/fix-the-login-bug.md",
      asks: [{ question: "Free text?", options: [] }],
      failValidation: 3,
      invalidMermaid: 0,
      files: [{ path: "a/b.txt", content: "line\n" }],
    });
    expect(ins.description).toBe("# Fix: the login   bug!\n\nrest");
  });

  it("parses [ask-multi:] and [ask-file:] in request order, each with its response type", () => {
    const ins = parseInstructions(
      "Parts\n[ask-file: Upload the spec]\n[ask-multi: Which parts? | api |  | web | docs ]\n[ask: Colour? | red | blue]\n[ask-file:  ]\n[ask-multi: Empty]",
    );
    expect(ins.asks).toEqual([
      { question: "Upload the spec", options: [], responseType: "file" },
      { question: "Which parts?", options: ["api", "web", "docs"], responseType: "multiple_choice" },
      { question: "Colour?", options: ["red", "blue"], responseType: "single_choice" },
      // A multiple choice without options is still asked; the implementer's tool turns it into free text.
      { question: "Empty", options: [], responseType: "multiple_choice" },
    ]);
    expect(ins.description).toBe("Parts");
  });

  it("parses [mcp: <server>.<tool> {json}] in order, JSON holding \"]\" included, and strips them", () => {
    const ins = parseInstructions('Tools\n[mcp: notes.add {"a": 2, "b": 3}]\n[mcp: search.find {"tags": ["x]", "y"]}] [mcp: notes.ping]\n[mcp: bad.json {nope}]');
    expect(ins.mcps).toEqual([
      { server: "notes", tool: "add", args: { a: 2, b: 3 } },
      { server: "search", tool: "find", args: { tags: ["x]", "y"] } },
      { server: "notes", tool: "ping", args: {} },
      // Arguments that are not a JSON object call the tool without any (its schema tells the model what is missing).
      { server: "bad", tool: "json", args: {} },
    ]);
    expect(ins.description).toBe("Tools");
  });
});

