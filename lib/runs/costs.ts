import { eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";

// A run's model cost, for the run's detail (GET /api/runs/:id); the runs list's costs view is lib/dashboard/costs.ts.

export type RunCost = { usd: number; tokensIn: number; tokensOut: number; calls: number };

export type CostBreakdown = RunCost & { stage?: string; model?: string };

/** One run's cost subtotals per stage and per model (the caller has checked that the user may see the run). */
export async function costBreakdownForRun({ runId }: { runId: string }): Promise<{ byStage: CostBreakdown[]; byModel: CostBreakdown[] }> {
  const db = await getDb();
  const totals = {
    usd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
    tokensIn: sql<number>`coalesce(sum(${modelCalls.tokensIn}), 0)`,
    tokensOut: sql<number>`coalesce(sum(${modelCalls.tokensOut}), 0)`,
    calls: sql<number>`count(*)`,
  };
  const [byStage, byModel] = await Promise.all([
    db.select({ stage: modelCalls.stage, ...totals }).from(modelCalls).where(eq(modelCalls.workflowRunId, runId)).groupBy(modelCalls.stage),
    db.select({ model: modelCalls.model, ...totals }).from(modelCalls).where(eq(modelCalls.workflowRunId, runId)).groupBy(modelCalls.model),
  ]);
  const num = <T extends RunCost>(r: T): T => ({ ...r, usd: Number(r.usd), tokensIn: Number(r.tokensIn), tokensOut: Number(r.tokensOut), calls: Number(r.calls) });
  const order = ["planning", "implementation", "validation", "delivery"];
  return {
    byStage: byStage.map(num).sort((a, b) => order.indexOf(a.stage) - order.indexOf(b.stage)),
    byModel: byModel.map(num).sort((a, b) => b.usd - a.usd || a.model.localeCompare(b.model)),
  };
}
