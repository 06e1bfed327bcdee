import { and, eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { gates, modelCalls } from "@/lib/db/schema";
import type { ImplementerState } from "@/lib/agents";
import type { Stage } from "@/lib/workflow";
import { stageWallMs } from "./estimate";
import { readDecidedGate } from "./gates/open";
import { workflowClock, type WaitResult } from "./steps/context";

/*
 * Budgets (run config `budgets.<planning|implementation|validation>: {tokens?, costUsd?, minutes?}`): how much a stage
 * may spend, over every attempt of the run: tokens (in + out) and cost (price table) from the recorded model calls, and
 * working wall time from the run's events (from STAGE_STARTED on, without the time it waited for a person at a gate, a
 * question or a pause). Crossing one opens a `budget` gate with three ways on: raise the budget by an amount, let the
 * implementer finish the task in progress and then stop (implementation only: the work goes to validation, and a
 * failure there goes to a person, never into an automatic fix loop), or cancel the run (POST /cancel). Reaching a budget
 * never fails the run by itself. `timeoutMinutes` stays the hard cut of one working stretch (a pause for extend or
 * cancel); a minutes budget is the soft, cumulative one, checked between turns.
 */

export type StageBudget = { tokens?: number; costUsd?: number; minutes?: number };
/** The stages that have a budget (config.budgets). */
export type BudgetStage = "planning" | "implementation" | "validation";
export type Spent = { tokens: number; costUsd: number; minutes: number };
export type BudgetMetric = "tokens" | "costUsd" | "minutes";
export type BudgetExceeded = { stage: Stage; metric: BudgetMetric; used: number; limit: number };

export const NOTHING_SPENT: Readonly<Spent> = Object.freeze({ tokens: 0, costUsd: 0, minutes: 0 });

/**
 * What the stage has spent so far, over every attempt of this run. Working minutes are read from the events only when
 * asked for (`wall`), counted up to now on the clock the events are stamped with.
 */
export async function stageSpend({ runId, stage, wall = false }: { runId: string; stage: Stage; wall?: boolean }): Promise<Spent> {
  const db = await getDb();
  const [row] = await db
    .select({
      tokens: sql<number>`coalesce(sum(${modelCalls.tokensIn} + ${modelCalls.tokensOut}), 0)`,
      costUsd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
    })
    .from(modelCalls)
    .where(and(eq(modelCalls.workflowRunId, runId), eq(modelCalls.stage, stage)));
  const minutes = wall ? ((await stageWallMs({ runId, now: Date.now() }))[stage] ?? 0) / 60_000 : 0;
  return { tokens: Number(row?.tokens ?? 0), costUsd: Number(row?.costUsd ?? 0), minutes };
}

/** The step the workflow runs after each implementer turn: over budget or not. */
export async function checkBudget({ runId, stage, budget, raised }: { runId: string; stage: Stage; budget: StageBudget; raised: Spent }) {
  return { exceeded: overBudget(stage, await stageSpend({ runId, stage, wall: budget.minutes !== undefined }), budget, raised) };
}

/**
 * What people have raised the stage's budget by so far, over the run's decided budget gates (every task's): the raises
 * a parallel task's own flow has not been told of yet, since another task's gate gave them.
 */
export async function raisedAtGates({ runId, stage }: { runId: string; stage: Stage }): Promise<Spent> {
  const db = await getDb();
  const rows = await db
    .select({ context: gates.context, payload: gates.payload })
    .from(gates)
    .where(and(eq(gates.workflowRunId, runId), eq(gates.kind, "budget"), eq(gates.decision, "raise")));
  let raised: Spent = { ...NOTHING_SPENT };
  for (const row of rows) {
    if ((row.context as { stage?: string } | null)?.stage !== stage) continue;
    const r = (row.payload as { raise?: Partial<Spent> } | null)?.raise ?? {};
    raised = addSpent(raised, { tokens: r.tokens ?? 0, costUsd: r.costUsd ?? 0, minutes: r.minutes ?? 0 });
  }
  return raised;
}

/**
 * A parallel task's budget crossing checked again as its gate would open, against every raise given at the run's budget
 * gates: another task's gate, decided meanwhile, may have covered it (one crossing, one gate). Null when it is covered.
 */
export async function recheckBudget({ runId, stage, budget }: { runId: string; stage: Stage; budget: StageBudget }) {
  return (await checkBudget({ runId, stage, budget, raised: await raisedAtGates({ runId, stage }) })).exceeded;
}

/** The first budget the spend is over (limits raised by what people added), or null. */
export function overBudget(stage: Stage, spent: Spent, budget: StageBudget, raised: Spent): BudgetExceeded | null {
  if (budget.tokens !== undefined && spent.tokens > budget.tokens + raised.tokens) {
    return { stage, metric: "tokens", used: spent.tokens, limit: budget.tokens + raised.tokens };
  }
  if (budget.costUsd !== undefined && spent.costUsd > budget.costUsd + raised.costUsd) {
    return { stage, metric: "costUsd", used: Math.round(spent.costUsd * 1e6) / 1e6, limit: budget.costUsd + raised.costUsd };
  }
  if (budget.minutes !== undefined && spent.minutes > budget.minutes + raised.minutes) {
    return { stage, metric: "minutes", used: Math.round(spent.minutes * 1000) / 1000, limit: budget.minutes + raised.minutes };
  }
  return null;
}

/** Two amounts added (what people raised a budget by, over its gates). */
export function addSpent(a: Spent, b: Spent): Spent {
  return { tokens: a.tokens + b.tokens, costUsd: a.costUsd + b.costUsd, minutes: a.minutes + b.minutes };
}

/** Minutes as people read them: "1.5 minutes"; under one, "45 seconds" ("2.5 seconds" under ten, "600 ms" under one). */
function minutesText(m: number): string {
  const seconds = m * 60;
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  const [n, unit] = m < 1 ? [seconds < 10 ? Number(seconds.toFixed(1)) : Math.round(seconds), "second"] : [Number(m.toFixed(1)), "minute"];
  return `${n} ${unit}${n === 1 ? "" : "s"}`;
}

export function describeExcess(e: BudgetExceeded): string {
  if (e.metric === "tokens") return `The ${e.stage} stage used ${e.used} tokens, over its budget of ${e.limit}.`;
  if (e.metric === "costUsd") return `The ${e.stage} stage cost $${e.used.toFixed(4)}, over its budget of $${e.limit.toFixed(4)}.`;
  return `The ${e.stage} stage worked ${minutesText(e.used)}, over its budget of ${minutesText(e.limit)}.`;
}

/** The raise a person gave, as the gate's notes say it. */
export function describeRaise(r: Partial<Spent>): string {
  const parts = [r.tokens ? `${r.tokens} tokens` : null, r.costUsd ? `$${r.costUsd}` : null, r.minutes ? `${r.minutes} minute${r.minutes === 1 ? "" : "s"}` : null];
  return `raised by ${parts.filter(Boolean).join(" and ")}`;
}

/** The decision on a budget gate, for the workflow (its wait re-checks this). */
export async function readBudgetDecision({ runId, gateId }: { runId: string; gateId: string }): Promise<WaitResult<{ action: "raise" | "finish_task"; raise: Spent; now: number }>> {
  const read = await readDecidedGate({ runId, gateId });
  if (read.state !== "decided") return read;
  const { gate } = read;
  const raise = (gate.payload as { raise?: Partial<Spent> } | null)?.raise ?? {};
  return {
    state: "done",
    action: gate.decision === "finish_task" ? "finish_task" : "raise",
    raise: { tokens: raise.tokens ?? 0, costUsd: raise.costUsd ?? 0, minutes: raise.minutes ?? 0 },
    now: workflowClock.now(),
  };
}

/** "Finish the task in progress, then stop": told to the implementer (pure). */
export function applyBudgetStop(state: ImplementerState): { state: ImplementerState; taskId: string | null } {
  const current = state.todos.find((t) => t.status === "in_progress") ?? null;
  const text = current
    ? `The implementation budget is spent. Finish ${current.id} "${current.title}" (in progress), mark it done, then stop: do not start another todo, and summarise what is left undone.`
    : "The implementation budget is spent. Stop now: do not start another todo, and summarise what is left undone.";
  return { state: { ...state, messages: [...state.messages, { role: "user", content: text }] }, taskId: current?.id ?? null };
}
