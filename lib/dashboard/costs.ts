import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls, projectMembers, workflowRuns } from "@/lib/db/schema";
import type { SessionUser } from "@/lib/auth/guard";
import type { RunCost } from "@/lib/runs/costs";

/**
 * Model cost per run, for the runs the user may see among `runIds` (others are left out, as if they did not exist).
 * One grouped query for a page of the runs list.
 */
export async function costsForRuns({ user, runIds }: { user: SessionUser; runIds: string[] }): Promise<Record<string, RunCost>> {
  if (runIds.length === 0) return {};
  const db = await getDb();
  const visible = await db
    .select({ id: workflowRuns.id })
    .from(workflowRuns)
    .innerJoin(projectMembers, and(eq(projectMembers.projectId, workflowRuns.projectId), eq(projectMembers.userId, user.id)))
    .where(inArray(workflowRuns.id, runIds));
  const ids = visible.map((r) => r.id);
  const out: Record<string, RunCost> = Object.fromEntries(ids.map((id) => [id, { usd: 0, tokensIn: 0, tokensOut: 0, calls: 0 }]));
  if (ids.length === 0) return out;
  const rows = await db
    .select({
      runId: modelCalls.workflowRunId,
      usd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
      tokensIn: sql<number>`coalesce(sum(${modelCalls.tokensIn}), 0)`,
      tokensOut: sql<number>`coalesce(sum(${modelCalls.tokensOut}), 0)`,
      calls: sql<number>`count(*)`,
    })
    .from(modelCalls)
    .where(inArray(modelCalls.workflowRunId, ids))
    .groupBy(modelCalls.workflowRunId);
  for (const row of rows) {
    if (row.runId) out[row.runId] = { usd: Number(row.usd), tokensIn: Number(row.tokensIn), tokensOut: Number(row.tokensOut), calls: Number(row.calls) };
  }
  return out;
}

/** Every model call of one run, oldest first (the caller has checked that the user may see the run). */
export async function modelCallsForRun({ runId }: { runId: string }) {
  const db = await getDb();
  const rows = await db
    .select({
      id: modelCalls.id,
      stage: modelCalls.stage,
      model: modelCalls.model,
      tokensIn: modelCalls.tokensIn,
      tokensOut: modelCalls.tokensOut,
      costUsd: modelCalls.costUsd,
      latencyMs: modelCalls.latencyMs,
      status: modelCalls.status,
      attempt: modelCalls.attempt,
      error: modelCalls.error,
      createdAt: modelCalls.createdAt,
    })
    .from(modelCalls)
    .where(eq(modelCalls.workflowRunId, runId))
    .orderBy(asc(modelCalls.createdAt))
    .limit(1000);
  return rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString() }));
}
