import { priceOf } from "@/lib/ai/prices";
import type { PlanDocument } from "@/lib/workflow/events";
import { planRounds } from "@/lib/workflow/task-rounds";

/*
 * The cost estimate on the plan gate (pure: the workflow's step and the dashboard share it). What the rest of a run will
 * take — tokens, cost and wall time for implementation, validation and delivery — as a range, from the plan's size and
 * this project's earlier completed runs of a similar size; from fixed per-task guesses priced with the price table when
 * the project has no history. Planning is already done when the gate opens: its actual usage is part of the estimate.
 */

export type Range = { low: number; high: number };
export type Usage = { tokens: number; costUsd: number; wallMs: number };
export type StageRange = { tokens: Range; costUsd: Range; wallMs: Range };
export type EstimatedStage = "implementation" | "validation" | "delivery";
export const ESTIMATED_STAGES: readonly EstimatedStage[] = ["implementation", "validation", "delivery"];

export type RunEstimate = {
  planVersion: number;
  tasks: number;
  /** The plan's size: one per task, and half a task more per file it may change (at most 10 files counted). */
  units: number;
  basis: { kind: "history"; runs: number } | { kind: "price-table" };
  /**
   * Tasks run side by side (limits.maxConcurrentTasks): implementation's wall time counts the plan's rounds (each as
   * long as its longest lane of tasks run one after another), `wallUnits` of the `units`; tokens and cost still add up over every task. Absent when
   * the tasks run one after another.
   */
  parallel?: { maxConcurrentTasks: number; rounds: number; wallUnits: number };
  /** Planning's usage up to the gate (actual, not predicted). */
  planning: Usage;
  stages: Record<EstimatedStage, StageRange>;
  /** Planning's actual plus the predicted stages. */
  total: StageRange;
};

/** An earlier completed run as the estimator learns from it: its plan's size and what each stage took. */
export type HistoryRun = {
  runId: string;
  units: number;
  stages: Partial<Record<EstimatedStage, { tokensIn: number; tokensOut: number; costUsd: number; wallMs: number }>>;
};

/** Models per stage (config.modelRouting), as `provider:model`. */
export type StageModels = { implementation: string; validation: string; delivery?: string | null };

const taskUnits = (t: { files?: string[] }) => 1 + 0.5 * Math.min(t.files?.length ?? 0, 10);

export function planUnits(plan: Pick<PlanDocument, "tasks">): number {
  const units = plan.tasks.reduce((sum, t) => sum + taskUnits(t), 0);
  return Math.max(1, units);
}

/** The plan's size along its rounds of parallel tasks: each round counts as its longest lane (its tasks one after another). */
export function parallelWallUnits(plan: Pick<PlanDocument, "tasks">, maxConcurrentTasks: number): { rounds: number; wallUnits: number } {
  const rounds = planRounds(plan, new Set(), maxConcurrentTasks);
  const size = new Map(plan.tasks.map((t) => [t.id, taskUnits(t)]));
  const lane = (ids: string[]) => ids.reduce((sum, id) => sum + (size.get(id) ?? 1), 0);
  const wallUnits = rounds.reduce((sum, lanes) => sum + Math.max(...lanes.map(lane)), 0);
  return { rounds: rounds.length, wallUnits: Math.max(1, wallUnits) };
}

/**
 * Per unit of plan size (delivery: per run) when there is no history: an agent loop of a dozen turns per task reading
 * files and tool results, a validator reading the diff. Deliberately a wide range (½× to 2×).
 */
const DEFAULTS: Record<EstimatedStage, { tokensIn: number; tokensOut: number; wallMs: number; perUnit: boolean }> = {
  implementation: { tokensIn: 24_000, tokensOut: 2_500, wallMs: 60_000, perUnit: true },
  validation: { tokensIn: 12_000, tokensOut: 1_500, wallMs: 30_000, perUnit: true },
  delivery: { tokensIn: 0, tokensOut: 0, wallMs: 5_000, perUnit: false },
};

/** At least this many runs of a similar size (a third to three times this plan's) are needed to use only those. */
const MIN_SIMILAR = 3;

function splitModel(id: string | null | undefined): { provider: string; model: string } | null {
  if (!id) return null;
  const at = id.indexOf(":");
  return at > 0 ? { provider: id.slice(0, at), model: id.slice(at + 1) } : null;
}

function priced(modelId: string | null | undefined, tokensIn: number, tokensOut: number): number | null {
  const id = splitModel(modelId);
  const price = id ? priceOf(id as Parameters<typeof priceOf>[0]) : undefined;
  if (!price) return null;
  return (tokensIn * price[0] + tokensOut * price[1]) / 1_000_000;
}

function quantile(sorted: number[], q: number): number {
  const i = (sorted.length - 1) * q;
  const lo = Math.floor(i);
  const hi = Math.ceil(i);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (i - lo);
}

/** A range over predictions: their spread (10th–90th percentile from 5 runs on), widened by a margin for the unknown. */
function spread(values: number[]): Range {
  const sorted = [...values].sort((a, b) => a - b);
  const many = sorted.length >= 5;
  return { low: (many ? quantile(sorted, 0.1) : sorted[0]!) * 0.8, high: (many ? quantile(sorted, 0.9) : sorted.at(-1)!) * 1.25 };
}

const roundRange = (r: Range, digits: number): Range => {
  const f = 10 ** digits;
  return { low: Math.round(r.low * f) / f, high: Math.round(r.high * f) / f };
};

function finish(r: { tokens: Range; costUsd: Range; wallMs: Range }): StageRange {
  return { tokens: roundRange(r.tokens, 0), costUsd: roundRange(r.costUsd, 6), wallMs: roundRange(r.wallMs, 0) };
}

/** The runs to learn from: those of a similar size when there are enough of them, else all. */
export function similarRuns(history: HistoryRun[], units: number): HistoryRun[] {
  const similar = history.filter((h) => h.units >= units / 3 && h.units <= units * 3);
  return similar.length >= MIN_SIMILAR ? similar : history;
}

export function estimateRun({
  plan,
  planVersion,
  planning,
  models,
  history,
  maxConcurrentTasks = 1,
}: {
  plan: Pick<PlanDocument, "tasks">;
  planVersion: number;
  planning: Usage;
  models: StageModels;
  history: HistoryRun[];
  /** limits.maxConcurrentTasks: above 1, implementation's wall time counts rounds of parallel tasks. */
  maxConcurrentTasks?: number;
}): RunEstimate {
  const units = planUnits(plan);
  const parallel = maxConcurrentTasks > 1 ? parallelWallUnits(plan, maxConcurrentTasks) : null;
  const side = parallel && parallel.wallUnits < units ? { maxConcurrentTasks, ...parallel } : null;
  /** Implementation's wall time shrinks to the rounds' share of the plan (the other stages see the whole). */
  const wallShare = (stage: EstimatedStage) => (side && stage === "implementation" ? side.wallUnits / units : 1);
  const learnFrom = similarRuns(history, units);
  const model: Record<EstimatedStage, string | null | undefined> = { implementation: models.implementation, validation: models.validation, delivery: models.delivery };
  const stages = {} as Record<EstimatedStage, StageRange>;
  for (const stage of ESTIMATED_STAGES) {
    const d = DEFAULTS[stage];
    const scale = (perRunUnits: number) => (d.perUnit ? units / Math.max(1, perRunUnits) : 1);
    if (learnFrom.length) {
      // Each earlier run, scaled to this plan's size, is one prediction; the range is their spread.
      const predictions = learnFrom.map((h) => {
        const s = h.stages[stage] ?? { tokensIn: 0, tokensOut: 0, costUsd: 0, wallMs: 0 };
        const k = scale(h.units);
        const tokensIn = s.tokensIn * k;
        const tokensOut = s.tokensOut * k;
        // Priced with this run's model when the price table knows it (history may have used another model).
        return { tokens: tokensIn + tokensOut, costUsd: priced(model[stage], tokensIn, tokensOut) ?? s.costUsd * k, wallMs: s.wallMs * k * wallShare(stage) };
      });
      stages[stage] = finish({
        tokens: spread(predictions.map((p) => p.tokens)),
        costUsd: spread(predictions.map((p) => p.costUsd)),
        wallMs: spread(predictions.map((p) => p.wallMs)),
      });
    } else {
      const k = d.perUnit ? units : 1;
      const tokensIn = d.tokensIn * k;
      const tokensOut = d.tokensOut * k;
      const cost = priced(model[stage], tokensIn, tokensOut) ?? 0;
      const range = (v: number): Range => ({ low: v * 0.5, high: v * 2 });
      stages[stage] = finish({ tokens: range(tokensIn + tokensOut), costUsd: range(cost), wallMs: range(d.wallMs * k * wallShare(stage)) });
    }
  }
  const sum = (pick: (s: StageRange) => Range, actual: number): Range =>
    ESTIMATED_STAGES.reduce((acc, s) => ({ low: acc.low + pick(stages[s]).low, high: acc.high + pick(stages[s]).high }), { low: actual, high: actual });
  return {
    planVersion,
    tasks: plan.tasks.length,
    units,
    basis: learnFrom.length ? { kind: "history", runs: learnFrom.length } : { kind: "price-table" },
    ...(side ? { parallel: side } : {}),
    planning,
    stages,
    total: finish({ tokens: sum((s) => s.tokens, planning.tokens), costUsd: sum((s) => s.costUsd, planning.costUsd), wallMs: sum((s) => s.wallMs, planning.wallMs) }),
  };
}

const WAIT_START_TYPES = ["APPROVAL_REQUESTED", "CLARIFICATION_REQUESTED", "RUN_PAUSED"] as const;
const WAIT_END_TYPES = ["APPROVAL_GRANTED", "APPROVAL_REJECTED", "PLAN_QUESTION_ASKED", "FIX_DECISION_MADE", "CLARIFICATION_ANSWERED", "CLARIFICATION_IGNORED", "RUN_RESUMED"] as const;
const RUN_END_TYPES = ["RUN_COMPLETED", "RUN_FAILED", "RUN_CANCELLED"] as const;
const WAIT_STARTS = new Set<string>(WAIT_START_TYPES);
const WAIT_ENDS = new Set<string>(WAIT_END_TYPES);
const RUN_ENDS = new Set<string>(RUN_END_TYPES);

/** The only event types stageWallTimes looks at: a read for wall times needs no others. */
export const WALL_TIME_EVENTS = ["STAGE_STARTED", "STAGE_COMPLETED", ...WAIT_START_TYPES, ...WAIT_END_TYPES, ...RUN_END_TYPES] as const;

/**
 * Wall time each stage spent working, from the run's events: from STAGE_STARTED to its end, without the time it waited
 * for a person (a gate, a question, a pause). A stage still open counts up to `now` when given.
 */
export function stageWallTimes(events: ReadonlyArray<{ type: string; payload: unknown; timestamp: number }>, now?: number): Record<string, number> {
  const out: Record<string, number> = {};
  let stage: string | null = null;
  let since: number | null = null;
  const close = (t: number) => {
    if (stage && since !== null) out[stage] = (out[stage] ?? 0) + Math.max(0, t - since);
    since = null;
  };
  for (const e of events) {
    if (e.type === "STAGE_STARTED") {
      close(e.timestamp);
      stage = String((e.payload as { stage?: string }).stage ?? "");
      since = e.timestamp;
    } else if (e.type === "STAGE_COMPLETED" || RUN_ENDS.has(e.type)) {
      close(e.timestamp);
      stage = null;
    } else if (WAIT_STARTS.has(e.type)) {
      close(e.timestamp);
    } else if (WAIT_ENDS.has(e.type) && stage && since === null) {
      since = e.timestamp;
    }
  }
  if (now !== undefined) close(now);
  return out;
}

export type Verdict = "below" | "within" | "above";
export type StageComparison = { stage: EstimatedStage; estimate: StageRange; actual: Usage | null; verdict: Record<keyof Usage, Verdict> | null };

const verdictOf = (value: number, r: Range): Verdict => (value < r.low ? "below" : value > r.high ? "above" : "within");

/** The estimate beside what the stages took: per stage and metric, below, within or above the range (null: not reached). */
export function compareEstimate({ estimate, actual }: { estimate: RunEstimate; actual: Partial<Record<EstimatedStage, Usage>> }): StageComparison[] {
  return ESTIMATED_STAGES.map((stage) => {
    const a = actual[stage] ?? null;
    const e = estimate.stages[stage];
    return {
      stage,
      estimate: e,
      actual: a,
      verdict: a ? { tokens: verdictOf(a.tokens, e.tokens), costUsd: verdictOf(a.costUsd, e.costUsd), wallMs: verdictOf(a.wallMs, e.wallMs) } : null,
    };
  });
}

/** The estimate of the plan in force beside what the stages took (GET /api/runs/:id → `estimate`). */
export type EstimateReport = { estimate: RunEstimate; planning: Usage | null; stages: StageComparison[] };
