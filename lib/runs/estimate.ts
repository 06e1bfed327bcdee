import { and, desc, eq, inArray, ne, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { gates, modelCalls, workflowEvents, workflowRuns, type TypeIndexedEvent } from "@/lib/db/schema";
import { eventTypeIn } from "@/lib/db/event-store";
import type { PlanDocument } from "@/lib/workflow";
import {
  compareEstimate,
  ESTIMATED_STAGES,
  estimateRun,
  planUnits,
  stageWallTimes,
  WALL_TIME_EVENTS,
  type EstimatedStage,
  type EstimateReport,
  type HistoryRun,
  type RunEstimate,
  type Usage,
} from "./estimate-model";
import { append, loadRun, workflowClock } from "./steps/context";

/*
 * The estimate's reads: this project's completed runs (what each stage took, the size of the plan each carried out),
 * this run's planning so far, and after the run (or as stages finish) the actuals to set beside the estimate. The
 * estimate is made once per plan gate, in a workflow step, and kept in the gate's context (`context.estimate`), so the
 * card shows the same numbers however often it is read.
 */

/** How many of the project's latest completed runs the estimate learns from. */
const HISTORY_RUNS = 20;

/** What the history reads of each run: its plans, and the events its stages' wall times come from. */
const EVENT_TYPES: readonly TypeIndexedEvent[] = ["PLAN_CREATED", "PLAN_EDITED", ...WALL_TIME_EVENTS];

/**
 * Wall time each stage of this run spent working so far (stageWallTimes), counted up to `now`: only the events it
 * looks at are read, through the (run, type) index, so a long run's log is not read whole (a budget check after
 * every implementer turn asks this).
 */
export async function stageWallMs({ runId, now }: { runId: string; now?: number }): Promise<Record<string, number>> {
  const db = await getDb();
  const events = await db
    .select({ type: workflowEvents.type, payload: workflowEvents.payload, timestamp: workflowEvents.timestamp })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(WALL_TIME_EVENTS)))
    .orderBy(workflowEvents.sequence);
  return stageWallTimes(
    events.map((e) => ({ ...e, timestamp: e.timestamp.getTime() })),
    now,
  );
}

/** Model usage per stage of some runs, from model_calls. */
async function usageByStage(runIds: string[]) {
  const db = await getDb();
  if (!runIds.length) return [];
  return db
    .select({
      runId: modelCalls.workflowRunId,
      stage: modelCalls.stage,
      tokensIn: sql<number>`coalesce(sum(${modelCalls.tokensIn}), 0)`,
      tokensOut: sql<number>`coalesce(sum(${modelCalls.tokensOut}), 0)`,
      costUsd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
    })
    .from(modelCalls)
    .where(inArray(modelCalls.workflowRunId, runIds))
    .groupBy(modelCalls.workflowRunId, modelCalls.stage);
}

/** The project's latest completed runs (not this one), each with its plan's size and what each stage took. */
export async function projectHistory({ projectId, excludeRunId }: { projectId: string; excludeRunId: string }): Promise<HistoryRun[]> {
  const db = await getDb();
  const runs = await db
    .select({ id: workflowRuns.id })
    .from(workflowRuns)
    .where(and(eq(workflowRuns.projectId, projectId), eq(workflowRuns.status, "completed"), ne(workflowRuns.id, excludeRunId)))
    .orderBy(desc(workflowRuns.completedAt))
    .limit(HISTORY_RUNS);
  const ids = runs.map((r) => r.id);
  if (!ids.length) return [];
  const [events, usage] = await Promise.all([
    db
      .select({ runId: workflowEvents.workflowRunId, type: workflowEvents.type, payload: workflowEvents.payload, timestamp: workflowEvents.timestamp })
      .from(workflowEvents)
      .where(and(inArray(workflowEvents.workflowRunId, ids), eventTypeIn(EVENT_TYPES)))
      .orderBy(workflowEvents.workflowRunId, workflowEvents.sequence),
    usageByStage(ids),
  ]);
  return ids.flatMap((runId): HistoryRun[] => {
    const own = events.filter((e) => e.runId === runId).map((e) => ({ ...e, timestamp: e.timestamp.getTime() }));
    // The plan the run carried out: its last version.
    const plan = own.filter((e) => e.type === "PLAN_CREATED" || e.type === "PLAN_EDITED").map((e) => (e.payload as { plan?: PlanDocument }).plan).filter(Boolean).at(-1);
    if (!plan) return [];
    const wall = stageWallTimes(own);
    const stages: HistoryRun["stages"] = {};
    for (const stage of ESTIMATED_STAGES) {
      const u = usage.find((r) => r.runId === runId && r.stage === stage);
      stages[stage] = { tokensIn: Number(u?.tokensIn ?? 0), tokensOut: Number(u?.tokensOut ?? 0), costUsd: Number(u?.costUsd ?? 0), wallMs: wall[stage] ?? 0 };
    }
    return [{ runId, units: planUnits(plan), stages }];
  });
}

/** What each stage of this run has taken so far (model calls and working wall time). */
export async function runUsage({ runId, now }: { runId: string; now?: number }): Promise<Record<string, Usage>> {
  const [wall, usage] = await Promise.all([stageWallMs({ runId, now }), usageByStage([runId])]);
  const out: Record<string, Usage> = {};
  for (const stage of new Set([...Object.keys(wall), ...usage.map((u) => u.stage)])) {
    const u = usage.find((r) => r.stage === stage);
    out[stage] = { tokens: Number(u?.tokensIn ?? 0) + Number(u?.tokensOut ?? 0), costUsd: Math.round(Number(u?.costUsd ?? 0) * 1e8) / 1e8, wallMs: wall[stage] ?? 0 };
  }
  return out;
}

/**
 * The workflow's step for a plan approved without a gate (trustMode.planning "auto"): the same estimate a gate would
 * carry, kept on the run as PLAN_ESTIMATED so the run can be set beside it after.
 */
export async function recordAutoEstimate({ runId, stepKey, plan, version }: { runId: string; stepKey: string; plan: PlanDocument; version: number }) {
  const estimate = await makeEstimate({ runId, plan, version });
  await append(runId, stepKey, [{ type: "PLAN_ESTIMATED", payload: { version, estimate } }]);
  return { estimated: true };
}

/** The workflow's step as a plan gate opens: the estimate for this plan, kept in the gate's context. */
export async function makeEstimate({ runId, plan, version }: { runId: string; plan: PlanDocument; version: number }): Promise<RunEstimate> {
  const run = await loadRun({ runId });
  const [history, usage] = await Promise.all([projectHistory({ projectId: run.projectId, excludeRunId: runId }), runUsage({ runId, now: workflowClock.now() })]);
  return estimateRun({
    plan,
    planVersion: version,
    planning: usage.planning ?? { tokens: 0, costUsd: 0, wallMs: 0 },
    models: { implementation: run.config.modelRouting.implementer, validation: run.config.modelRouting.validator },
    history,
    maxConcurrentTasks: run.config.limits.maxConcurrentTasks ?? 1,
  });
}

/**
 * The estimate of the plan in force (the last plan gate decided, else the one waiting, else the latest PLAN_ESTIMATED
 * of a plan approved without a gate) beside what the stages took so far; null when there is none (runs from before
 * estimates).
 */
/** The latest estimate of a plan approved without a gate (PLAN_ESTIMATED), through the (run, type) index. */
async function autoEstimate(runId: string): Promise<RunEstimate | undefined> {
  const db = await getDb();
  const [row] = await db
    .select({ payload: workflowEvents.payload })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(["PLAN_ESTIMATED"])))
    .orderBy(desc(workflowEvents.sequence))
    .limit(1);
  return (row?.payload as { estimate?: RunEstimate } | undefined)?.estimate;
}

export async function estimateReport({ runId }: { runId: string }): Promise<EstimateReport | null> {
  const db = await getDb();
  const rows = await db.select({ status: gates.status, context: gates.context }).from(gates).where(and(eq(gates.workflowRunId, runId), eq(gates.kind, "plan"))).orderBy(desc(gates.gateNumber));
  const withEstimate = rows.filter((r) => (r.context as { estimate?: RunEstimate } | null)?.estimate);
  const chosen = withEstimate.find((r) => r.status === "approved") ?? withEstimate[0];
  const estimate = (chosen?.context as { estimate?: RunEstimate } | undefined)?.estimate ?? (await autoEstimate(runId));
  if (!estimate) return null;
  // A stage in progress counts up to now (the report is read by people, not replayed).
  const usage = await runUsage({ runId, now: Date.now() });
  const actual: Partial<Record<EstimatedStage, Usage>> = {};
  for (const stage of ESTIMATED_STAGES) if (usage[stage]) actual[stage] = usage[stage];
  return { estimate, planning: usage.planning ?? null, stages: compareEstimate({ estimate, actual }) };
}
