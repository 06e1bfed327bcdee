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
      // One reply for both calls (each keeps the fields of its own schema): the review and the alignment score.
      return { text: JSON.stringify({ findings: [], feedback: "", rationale: "scripted", ...review }) };
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
    expect(low.feedback).toBe("Rename v.\nAlignment score 8 is below 9: scripted");
    expect(low.findings).toEqual(findings);
    const lenient = await validate(reviewer({ passed: true, alignmentScore: 8 }).model, plan, 7);
    expect(lenient.passed).toBe(true);
  });
});

describe("the alignment score is its own call", () => {
  /** Answers the review and the alignment call apart, by the schema each asks for. */
  function twoCalls(review: object, alignment: object) {
    const calls: Array<{ kind: "review" | "alignment"; prompt: string; system: string }> = [];
    const model = createScriptedModel({
      respond: (o) => {
        const schema = o.responseFormat?.type === "json" ? (o.responseFormat.schema as { properties?: Record<string, unknown> }) : {};
        const kind = "alignmentScore" in (schema.properties ?? {}) ? "alignment" : "review";
        const system = o.prompt.filter((m) => m.role === "system").map((m) => String(m.content)).join("\n");
        calls.push({ kind, prompt: instructionText(o.prompt), system });
        return { text: JSON.stringify(kind === "alignment" ? alignment : review) };
      },
    });
    return { model, calls };
  }

  it("sees the request, plan and diff but neither the checks nor the review, and its low score fails a passing review", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const { model, calls } = twoCalls({ passed: true, findings: [], feedback: "" }, { alignmentScore: 6, rationale: "Half of the request is missing." });
    const r = await validate(model);
    expect(calls.map((c) => c.kind)).toEqual(["review", "alignment"]);
    const alignment = calls[1]!;
    expect(alignment.prompt).toContain("+export const v = 2;");
    expect(alignment.prompt).toContain("Bump the version");
    expect(alignment.prompt).not.toContain("<checks>");
    expect(alignment.prompt).not.toContain('"criterion":"AC1"');
    expect(alignment.prompt).not.toContain("out-of-scope");
    expect(r).toMatchObject({ passed: false, alignmentScore: 6, alignmentRationale: "Half of the request is missing." });
    expect(r.feedback).toContain("Alignment score 6 is below 9: Half of the request is missing.");
    expect(r.report).toContain("without the checks or the review): Half of the request is missing.");
  });

  it("a failing review and a red command leave the score as the alignment call gave it", async () => {
    const red = planOf({ tasks: [{ id: "T1", files: ["src/"] }], criteria: [{ id: "AC1", description: "tests pass", command: "false" }] });
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const { model } = twoCalls(
      { passed: false, findings: [{ severity: "major", criterion: "AC1", evidence: "fails" }], feedback: "Fix AC1." },
      { alignmentScore: 10, rationale: "Does what was asked." },
    );
    const r = await validate(model, red);
    expect(r.passed).toBe(false);
    expect(r.alignmentScore).toBe(10);
    expect(r.feedback).not.toContain("Alignment score");
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

  it("the approved plan is frozen: validating another plan than the approved one is a major finding, whatever the review says", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    const model = reviewer({ passed: true, alignmentScore: 10 }).model;
    const changed = await runValidator({ plan, request: "x", sandbox, modelId: "demo:scripted", model, context: {}, frozen: { approved: "a".repeat(64), validated: "b".repeat(64) } });
    expect(changed.passed).toBe(false);
    expect(changed.findings).toContainEqual({ severity: "major", criterion: "plan:frozen", evidence: expect.stringContaining("is not the approved plan (aaaaaaaaaaaa)") });
    expect(changed.feedback).toMatch(/a changed plan needs a new approval/);
    expect(changed.report).toMatch(/\*\*failed\*\* — frozen/);
    const same = await runValidator({ plan, request: "x", sandbox, modelId: "demo:scripted", model, context: {}, frozen: { approved: "a".repeat(64), validated: "a".repeat(64) } });
    expect(same.passed).toBe(true);
    expect(same.planChecks.find((c) => c.kind === "frozen")).toMatchObject({ passed: true });
  });

  it("required commands present: a missing program or npm script fails though the command exits 0; present ones pass", async () => {
    await sandbox.writeFile("src/app.ts", "export const v = 2;\n");
    await sandbox.writeFile("package.json", JSON.stringify({ scripts: { test: "true" } }));
    const p = planOf({
      tasks: [{ id: "T1", files: ["src/"] }],
      criteria: [
        { id: "AC1", description: "present", command: "test -f src/app.ts" },
        { id: "AC2", description: "no such script", command: "./scripts/check.sh || true" },
        { id: "AC3", description: "no such program", command: "definitely-not-a-program-xyz --version || true" },
        { id: "AC4", description: "no such npm script", command: "npm run lint --if-present || true" },
      ],
    });
    const r = await validate(reviewer({ passed: true, alignmentScore: 10 }).model, p);
    expect(r.checks.every((c) => c.passed)).toBe(true);
    expect(r.passed).toBe(false);
    const commands = r.planChecks.find((c) => c.kind === "commands")!;
    expect(commands.passed).toBe(false);
    expect(commands.detail).toContain("./scripts/check.sh does not exist");
    expect(commands.detail).toContain("definitely-not-a-program-xyz is not installed");
    expect(commands.detail).toContain('package.json has no "lint" script');
    expect(commands.detail).not.toContain("AC1");

    await sandbox.writeFile("scripts/check.sh", "#!/bin/sh\nexit 0\n");
    const ok = planOf({ tasks: [{ id: "T1", files: ["src/", "scripts/"] }], criteria: [{ id: "AC1", description: "script", command: "./scripts/check.sh || true" }] });
    expect((await validate(reviewer({ passed: true, alignmentScore: 10 }).model, ok)).planChecks.find((c) => c.kind === "commands")?.passed).toBe(true);
  });
});
