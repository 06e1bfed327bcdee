import { describe, expect, it } from "vitest";
import { compareEstimate, estimateRun, planUnits, stageWallTimes, type HistoryRun } from "./estimate-model";

const plan = (n: number, files = 1) => ({ tasks: Array.from({ length: n }, (_, i) => ({ id: `T${i + 1}`, title: `Task ${i + 1}`, files: Array.from({ length: files }, (_, j) => `f${j}.ts`) })) });
const planning = { tokens: 1000, costUsd: 0.01, wallMs: 20_000 };
const models = { implementation: "openai:gpt-4o-mini", validation: "anthropic:claude-haiku-4-5" };

function past(runId: string, units: number, implTokensIn: number, implWallMs: number): HistoryRun {
  return {
    runId,
    units,
    stages: {
      implementation: { tokensIn: implTokensIn, tokensOut: implTokensIn / 10, costUsd: 99, wallMs: implWallMs },
      validation: { tokensIn: 5000, tokensOut: 500, costUsd: 0.5, wallMs: 10_000 },
      delivery: { tokensIn: 0, tokensOut: 0, costUsd: 0, wallMs: 4_000 },
    },
  };
}

describe("the cost estimate", () => {
  it("sizes a plan by its tasks and the files each may change", () => {
    expect(planUnits(plan(2, 0))).toBe(2);
    expect(planUnits(plan(2, 2))).toBe(4);
    expect(planUnits({ tasks: [] })).toBe(1);
  });

  it("with no history: per-task guesses priced from the price table, a ½×–2× range, planning's actual in the total", () => {
    const e = estimateRun({ plan: plan(2, 0), planVersion: 1, planning, models, history: [] });
    expect(e.basis).toEqual({ kind: "price-table" });
    expect(e.units).toBe(2);
    // 2 units × (24k in + 2.5k out) = 53k tokens; gpt-4o-mini: 48k × $0.15/M + 5k × $0.6/M = $0.0102.
    expect(e.stages.implementation.tokens).toEqual({ low: 26_500, high: 106_000 });
    expect(e.stages.implementation.costUsd).toEqual({ low: 0.0051, high: 0.0204 });
    expect(e.stages.implementation.wallMs).toEqual({ low: 60_000, high: 240_000 });
    // claude-haiku-4-5 ($1/$5): 24k × 1 + 3k × 5 = $0.039.
    expect(e.stages.validation.costUsd).toEqual({ low: 0.0195, high: 0.078 });
    expect(e.stages.delivery.tokens).toEqual({ low: 0, high: 0 });
    expect(e.total.tokens.low).toBe(1000 + 26_500 + 13_500);
    expect(e.total.costUsd.low).toBeCloseTo(0.01 + 0.0051 + 0.0195, 6);
  });

  it("a model the price table does not know costs nothing in the fallback, but still has tokens and time", () => {
    const e = estimateRun({ plan: plan(1, 0), planVersion: 1, planning, models: { implementation: "demo:default", validation: "demo:default" }, history: [] });
    expect(e.stages.implementation.costUsd).toEqual({ low: 0, high: 0 });
    expect(e.stages.implementation.tokens.high).toBeGreaterThan(0);
  });

  it("with history: earlier runs scaled to this plan's size, the range their spread widened, priced with this run's model", () => {
    // Two earlier runs of 2 units each: 20k and 40k input tokens for implementation.
    const history = [past("a", 2, 20_000, 60_000), past("b", 2, 40_000, 120_000)];
    const e = estimateRun({ plan: plan(4, 0), planVersion: 3, planning, models, history });
    expect(e.basis).toEqual({ kind: "history", runs: 2 });
    // This plan is twice the size: 44k and 88k tokens predicted, widened by 0.8× and 1.25×.
    expect(e.stages.implementation.tokens).toEqual({ low: 35_200, high: 110_000 });
    expect(e.stages.implementation.wallMs).toEqual({ low: 96_000, high: 300_000 });
    // Priced with gpt-4o-mini, not the $99 the history's model cost: 40k × 0.15 + 4k × 0.6 = $0.0084 → ×0.8.
    expect(e.stages.implementation.costUsd.low).toBeCloseTo(0.00672, 6);
    // Delivery does not grow with the plan.
    expect(e.stages.delivery.wallMs).toEqual({ low: 3200, high: 5000 });
  });

  it("learns only from runs of a similar size when there are enough of them", () => {
    const small = [past("a", 1, 10_000, 1), past("b", 1, 10_000, 1), past("c", 1, 10_000, 1)];
    const huge = past("d", 40, 4_000_000, 1);
    expect(estimateRun({ plan: plan(1, 0), planVersion: 1, planning, models, history: [...small, huge] }).basis).toEqual({ kind: "history", runs: 3 });
    expect(estimateRun({ plan: plan(1, 0), planVersion: 1, planning, models, history: [small[0]!, huge] }).basis).toEqual({ kind: "history", runs: 2 });
  });

  it("wall time per stage leaves out the waits for people", () => {
    const t = (type: string, timestamp: number, payload: object = {}) => ({ type, timestamp, payload });
    const wall = stageWallTimes([
      t("STAGE_STARTED", 0, { stage: "planning" }),
      t("APPROVAL_REQUESTED", 10),
      t("APPROVAL_GRANTED", 1000),
      t("STAGE_COMPLETED", 1002, { stage: "planning" }),
      t("STAGE_STARTED", 1010, { stage: "implementation" }),
      t("CLARIFICATION_REQUESTED", 1020),
      t("CLARIFICATION_ANSWERED", 5000),
      t("STAGE_STARTED", 5030, { stage: "validation" }),
    ], 5100);
    expect(wall).toEqual({ planning: 12, implementation: 40, validation: 70 });
  });

  it("compares the actuals with the estimate: below, within or above each range, null for a stage not reached", () => {
    const e = estimateRun({ plan: plan(2, 0), planVersion: 1, planning, models, history: [] });
    const rows = compareEstimate({ estimate: e, actual: { implementation: { tokens: 200_000, costUsd: 0.01, wallMs: 1 } } });
    expect(rows.map((r) => r.stage)).toEqual(["implementation", "validation", "delivery"]);
    expect(rows[0]!.verdict).toEqual({ tokens: "above", costUsd: "within", wallMs: "below" });
    expect(rows[1]!.verdict).toBeNull();
  });
});

describe("the estimate of a plan whose tasks run in parallel", () => {
  const plan = {
    tasks: [
      { id: "T1", title: "a", description: "", dependsOn: [], files: ["a"], checks: [] },
      { id: "T2", title: "b", description: "", dependsOn: [], files: ["b"], checks: [] },
      { id: "T3", title: "c", description: "", dependsOn: [], files: ["c"], checks: [] },
      { id: "T4", title: "d", description: "", dependsOn: ["T1", "T2", "T3"], files: ["d"], checks: [] },
    ],
  };
  const base = { plan, planVersion: 1, planning: { tokens: 0, costUsd: 0, wallMs: 0 }, models: { implementation: "demo:default", validation: "demo:default" }, history: [] };

  it("counts implementation's wall time by rounds (each as long as its largest task), tokens and cost over every task", () => {
    const one = estimateRun({ ...base, maxConcurrentTasks: 1 });
    const three = estimateRun({ ...base, maxConcurrentTasks: 3 });
    expect(one.parallel).toBeUndefined();
    expect(three.parallel).toEqual({ maxConcurrentTasks: 3, rounds: 2, wallUnits: 3 });
    // Four tasks of size 1.5 each: 6 units in a row, two rounds of 1.5 side by side.
    expect(three.stages.implementation.wallMs.high).toBeCloseTo(one.stages.implementation.wallMs.high / 2, 0);
    expect(three.stages.implementation.tokens).toEqual(one.stages.implementation.tokens);
    expect(three.stages.validation).toEqual(one.stages.validation);
  });
});
