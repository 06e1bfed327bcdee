import { and, eq, like, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";

// A run's model cost, for the run's detail (GET /api/runs/:id); the runs list's costs view is lib/dashboard/costs.ts.

export type RunCost = { usd: number; tokensIn: number; tokensOut: number; calls: number };

export type CostBreakdown = RunCost & { stage?: string; model?: string; taskId?: string };

/** The parallel task a model call was made for, from its step key (`<run>/impl:<attempt>:task:<id>:…`), or null. */
export function taskOfStepKey(stepKey: string | null): string | null {
  return stepKey ? (/\/impl:\d+:task:([^:]+):/.exec(stepKey)?.[1] ?? null) : null;
}

/**
 * One run's cost subtotals per stage, per model, and per parallel task (limits.maxConcurrentTasks; the calls of each
 * task's own session, which add up with the others' in the implementation stage's total and its budget). The caller
 * has checked that the user may see the run.
 */
export async function costBreakdownForRun({ runId }: { runId: string }): Promise<{ byStage: CostBreakdown[]; byModel: CostBreakdown[]; byTask: CostBreakdown[] }> {
  const db = await getDb();
  const totals = {
    usd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
    tokensIn: sql<number>`coalesce(sum(${modelCalls.tokensIn}), 0)`,
    tokensOut: sql<number>`coalesce(sum(${modelCalls.tokensOut}), 0)`,
    calls: sql<number>`count(*)`,
  };
  const [byStage, byModel, byStep] = await Promise.all([
    db.select({ stage: modelCalls.stage, ...totals }).from(modelCalls).where(eq(modelCalls.workflowRunId, runId)).groupBy(modelCalls.stage),
    db.select({ model: modelCalls.model, ...totals }).from(modelCalls).where(eq(modelCalls.workflowRunId, runId)).groupBy(modelCalls.model),
    db
      .select({ stepKey: modelCalls.stepKey, ...totals })
      .from(modelCalls)
      .where(and(eq(modelCalls.workflowRunId, runId), like(modelCalls.stepKey, "%/impl:%:task:%")))
      .groupBy(modelCalls.stepKey),
  ]);
  const tasks = new Map<string, RunCost>();
  for (const row of byStep) {
    const taskId = taskOfStepKey(row.stepKey);
    if (!taskId) continue;
    const sum = tasks.get(taskId) ?? { usd: 0, tokensIn: 0, tokensOut: 0, calls: 0 };
    tasks.set(taskId, { usd: sum.usd + Number(row.usd), tokensIn: sum.tokensIn + Number(row.tokensIn), tokensOut: sum.tokensOut + Number(row.tokensOut), calls: sum.calls + Number(row.calls) });
  }
  const num = <T extends RunCost>(r: T): T => ({ ...r, usd: Number(r.usd), tokensIn: Number(r.tokensIn), tokensOut: Number(r.tokensOut), calls: Number(r.calls) });
  const order = ["planning", "implementation", "validation", "delivery"];
  return {
    byStage: byStage.map(num).sort((a, b) => order.indexOf(a.stage) - order.indexOf(b.stage)),
    byModel: byModel.map(num).sort((a, b) => b.usd - a.usd || a.model.localeCompare(b.model)),
    byTask: [...tasks].map(([taskId, cost]) => ({ taskId, ...cost })).sort((a, b) => a.taskId.localeCompare(b.taskId, undefined, { numeric: true })),
  };
}
