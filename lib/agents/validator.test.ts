import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { runValidator } from "@/lib/agents/validator";
import { createScriptedModel, instructionText } from "@/lib/ai/scripted-model";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";
import { planOf } from "@/tests/agents/helpers/plan";

type Sbx = Awaited<ReturnType<typeof createTempSandbox>>;
let sandbox: Sbx;
beforeEach(async () => {
  sandbox = await createTempSandbox({ "src/app.ts": "export const v = 1;\n" });
});
afterEach(() => sandbox.destroy());

function reviewer(review: { passed: boolean; alignmentScore: number; findings?: unknown[]; feedback?: string }) {
  const seen: LanguageModelV3CallOptions[] = [];
  const model = createScriptedModel({
    respond: (o) => {
      seen.push(o);
      return { text: JSON.stringify({ findings: [], feedback: "", ...review }) };
    },
  });
  return { model, seen };
}

const plan = planOf({
  tasks: [{ id: "T1", files: ["src/"] }],
  criteria: [
    { id: "AC1", description: "the app file exists", command: "test -f src/app.ts" },
    { id: "AC2", description: "reads well" },
  ],
});

async function validate(model: ReturnType<typeof reviewer>["model"], p = plan, threshold?: number) {
  return runValidator({ plan: p, request: "Bump the version", sandbox, modelId: "demo:scripted", model, threshold, context: {} });
}

describe("validator", () => {
  it("passes with green commands, in-scope changes and a score at the threshold", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const { model, seen } = reviewer({ passed: true, alignmentScore: 9 });
    const r = await validate(model);
    expect(r.passed).toBe(true);
    expect(r.checks).toEqual([expect.objectContaining({ criterionId: "AC1", passed: true, exitCode: 0 })]);
    expect(r.changedFiles).toEqual(["src/app.ts"]);
    expect(r.outOfScopeFiles).toEqual([]);
    expect(r.report).toContain("**Result:** passed");
    expect(r.report).toContain("| AC1: the app file exists | `test -f src/app.ts` | ✅ passed |");
    // Blind review: it sees the diff and check results, not the implementer's conversation.
    const prompt = instructionText(seen[0]!.prompt);
    expect(prompt).toContain("+export const v = 2;");
    expect(prompt).toContain('"criterion":"AC1"');
  });

  it("fails on a red command even when the reviewer is happy", async () => {
    const red = planOf({ tasks: [{ id: "T1", files: ["src/"] }], criteria: [{ id: "AC1", description: "tests pass", command: "sh -c 'echo boom >&2; exit 3'" }] });
    const { model } = reviewer({ passed: true, alignmentScore: 10 });
    const r = await validate(model, red);
    expect(r.passed).toBe(false);
    expect(r.checks[0]).toMatchObject({ passed: false, exitCode: 3 });
    expect(r.checks[0]!.output).toContain("boom");
    expect(r.findings).toContainEqual(expect.objectContaining({ severity: "major", criterion: "AC1" }));
    expect(r.feedback).toContain("Make `sh -c 'echo boom >&2; exit 3'` pass");
    expect(r.report).toContain("❌ exit 3");
  });

  it("flags a file changed outside the plan's scope (the plan is a contract)", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    await sandbox.writeFile("package.json", "{}\n");
    const { model, seen } = reviewer({ passed: true, alignmentScore: 10 });
    const r = await validate(model);
    expect(r.outOfScopeFiles).toEqual(["package.json"]);
    expect(r.passed).toBe(false);
    expect(r.findings[0]).toMatchObject({ severity: "major", criterion: "scope" });
    expect(r.report).toContain("`package.json` — **outside the plan's scope**");
    expect(instructionText(seen[0]!.prompt)).toContain("<out-of-scope-files>\npackage.json");
  });

  it("fails below the score threshold, and a configured threshold is honoured", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const findings = [{ severity: "minor", criterion: "AC2", evidence: "naming is unclear" }];
    const low = await validate(reviewer({ passed: true, alignmentScore: 8, findings, feedback: "Rename v." }).model);
    expect(low.passed).toBe(false);
    expect(low.feedback).toBe("Rename v.");
    expect(low.findings).toEqual(findings);
    const lenient = await validate(reviewer({ passed: true, alignmentScore: 8 }).model, plan, 7);
    expect(lenient.passed).toBe(true);
  });
});

describe("plan constraints checked by Gatehouse, not by the model", () => {
  it("a file a task names that does not exist fails validation even when the review passes it", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const p = planOf({ tasks: [{ id: "T1", files: ["src/app.ts"] }, { id: "T2", files: ["src/missing.ts"] }], criteria: [] });
    const r = await validate(reviewer({ passed: true, alignmentScore: 10 }).model, p);
    expect(r.passed).toBe(false);
    expect(r.planChecks).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: "files", passed: false, detail: expect.stringContaining("T2: src/missing.ts") })]),
    );
    expect(r.findings).toEqual(expect.arrayContaining([expect.objectContaining({ severity: "major", criterion: "plan:files" })]));
    expect(r.report).toContain("## Plan constraints (checked by Gatehouse, not by the model)");
  });

  it("tasks finished out of dependency order fail; in order they pass", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const p = planOf({ tasks: [{ id: "T1", files: ["src/"] }, { id: "T2", files: ["src/"], dependsOn: ["T1"] }], criteria: [] });
    const model = reviewer({ passed: true, alignmentScore: 10 }).model;
    const wrong = await runValidator({ plan: p, request: "x", sandbox, modelId: "demo:scripted", model, context: {}, completedOrder: ["T2", "T1"] });
    expect(wrong.passed).toBe(false);
    expect(wrong.planChecks.find((c) => c.kind === "order")).toMatchObject({ passed: false, detail: expect.stringContaining("T2 finished before T1") });
    const right = await runValidator({ plan: p, request: "x", sandbox, modelId: "demo:scripted", model, context: {}, completedOrder: ["T1", "T2"] });
    expect(right.passed).toBe(true);
    expect(right.planChecks.every((c) => c.passed)).toBe(true);
  });
});
