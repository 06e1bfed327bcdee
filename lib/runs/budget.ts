import { and, eq, sql } from "drizzle-orm";
import { z } from "zod";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import type { SessionUser } from "@/lib/auth/guard";
import type { ImplementerState } from "@/lib/agents";
import type { Stage } from "@/lib/workflow";
import { decide } from "./decisions";
import { readDecidedGate, workflowClock, type WaitResult } from "./workflow-ops";

/*
 * Budgets (run config `budgets.<planning|implementation|validation>: {tokens?, costUsd?}`): how much a stage may spend
 * on model calls, from the recorded calls (tokens in + out, cost from the price table). Crossing one opens a `budget`
 * gate with three ways on: raise the budget by an amount, let the implementer finish the task in progress and then stop
 * (implementation only: the work goes to validation, and a failure there goes to a person, never into an automatic fix
 * loop), or cancel the run (POST /cancel). Reaching a budget never fails the run by itself. Wall time is bounded by
 * `timeoutMinutes` (a pause for extend or cancel).
 */

export type StageBudget = { tokens?: number; costUsd?: number };
/** The stages that have a budget (config.budgets). */
export type BudgetStage = "planning" | "implementation" | "validation";
export type Spent = { tokens: number; costUsd: number };
export type BudgetExceeded = { stage: Stage; metric: "tokens" | "costUsd"; used: number; limit: number };

/** What the stage has spent so far, over every attempt of this run. */
export async function stageSpend({ runId, stage }: { runId: string; stage: Stage }): Promise<Spent> {
  const db = await getDb();
  const [row] = await db
    .select({
      tokens: sql<number>`coalesce(sum(${modelCalls.tokensIn} + ${modelCalls.tokensOut}), 0)`,
      costUsd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
    })
    .from(modelCalls)
    .where(and(eq(modelCalls.workflowRunId, runId), eq(modelCalls.stage, stage)));
  return { tokens: Number(row?.tokens ?? 0), costUsd: Number(row?.costUsd ?? 0) };
}

/** The step the workflow runs after each implementer turn: over budget or not. */
export async function checkBudget({ runId, stage, budget, raised }: { runId: string; stage: Stage; budget: StageBudget; raised: Spent }) {
  return { exceeded: overBudget(stage, await stageSpend({ runId, stage }), budget, raised) };
}

/** The first budget the spend is over (limits raised by what people added), or null. */
export function overBudget(stage: Stage, spent: Spent, budget: StageBudget, raised: Spent): BudgetExceeded | null {
  if (budget.tokens !== undefined && spent.tokens > budget.tokens + raised.tokens) {
    return { stage, metric: "tokens", used: spent.tokens, limit: budget.tokens + raised.tokens };
  }
  if (budget.costUsd !== undefined && spent.costUsd > budget.costUsd + raised.costUsd) {
    return { stage, metric: "costUsd", used: Math.round(spent.costUsd * 1e6) / 1e6, limit: budget.costUsd + raised.costUsd };
  }
  return null;
}

export function describeExcess(e: BudgetExceeded): string {
  return e.metric === "tokens"
    ? `The ${e.stage} stage used ${e.used} tokens, over its budget of ${e.limit}.`
    : `The ${e.stage} stage cost $${e.used.toFixed(4)}, over its budget of $${e.limit.toFixed(4)}.`;
}

export const budgetDecisionSchema = z
  .strictObject({
    gateId: z.string().trim().min(1).max(100).optional(),
    action: z.enum(["raise", "finish_task"], { error: 'must be "raise" or "finish_task" (to cancel, use POST /api/runs/:id/cancel)' }),
    tokens: z.number({ error: "must be a number" }).int("must be a whole number").positive("must be more than 0").max(1e9).optional(),
    costUsd: z.number({ error: "must be a number" }).positive("must be more than 0").max(1e6).optional(),
  })
  .refine((b) => b.action !== "raise" || b.tokens !== undefined || b.costUsd !== undefined, {
    message: "raise needs tokens or costUsd: how much to add to the budget",
    path: ["tokens"],
  });

/** A person's way on at a budget gate: raise it, or let the task in progress finish and stop. */
export async function decideBudget({ user, runId, input }: { user: SessionUser; runId: string; input: z.output<typeof budgetDecisionSchema> }) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      if (gate.kind !== "budget") throw new AppError("conflict:gate", `Gate ${gate.gateNumber} is a ${gate.kind} gate, not a budget gate.`);
      const stage = (gate.context as { stage?: string } | null)?.stage;
      if (input.action === "finish_task" && stage !== "implementation") {
        throw new AppError(
          "conflict:gate",
          `The ${stage ?? "stage"} budget has no task in progress to finish: raise it (action "raise" with tokens or costUsd) or cancel the run (POST /api/runs/:id/cancel).`,
        );
      }
    },
    claim: {
      status: "approved",
      decision: input.action,
      notes: input.action === "raise" ? `raised by ${[input.tokens ? `${input.tokens} tokens` : null, input.costUsd ? `$${input.costUsd}` : null].filter(Boolean).join(" and ")}` : "finish the task in progress, then stop",
      payload: { raise: { tokens: input.tokens ?? 0, costUsd: input.costUsd ?? 0 } },
    },
    events: (gate) => [{ type: "APPROVAL_GRANTED", payload: { gateId: gate.id, by: user.id, notes: input.action === "raise" ? "budget raised" : "finish the task, then stop" } }],
  });
}

/** The decision on a budget gate, for the workflow (its wait re-checks this). */
export async function readBudgetDecision({ runId, gateId }: { runId: string; gateId: string }): Promise<WaitResult<{ action: "raise" | "finish_task"; raise: Spent; now: number }>> {
  const read = await readDecidedGate({ runId, gateId });
  if (read.state !== "decided") return read;
  const { gate } = read;
  const raise = (gate.payload as { raise?: Partial<Spent> } | null)?.raise ?? {};
  return { state: "done", action: gate.decision === "finish_task" ? "finish_task" : "raise", raise: { tokens: raise.tokens ?? 0, costUsd: raise.costUsd ?? 0 }, now: workflowClock.now() };
}

/** "Finish the task in progress, then stop": told to the implementer (pure). */
export function applyBudgetStop(state: ImplementerState): { state: ImplementerState; taskId: string | null } {
  const current = state.todos.find((t) => t.status === "in_progress") ?? null;
  const text = current
    ? `The implementation budget is spent. Finish ${current.id} "${current.title}" (in progress), mark it done, then stop: do not start another todo, and summarise what is left undone.`
    : "The implementation budget is spent. Stop now: do not start another todo, and summarise what is left undone.";
  return { state: { ...state, messages: [...state.messages, { role: "user", content: text }] }, taskId: current?.id ?? null };
}
