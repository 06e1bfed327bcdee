import { and, eq, inArray, ne, or, sql } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { workflowRuns } from "@/lib/db/schema";
import { appendEventsTx } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { getEnv } from "@/lib/env";
import { createRunBranch } from "@/lib/git";
import type { RunState, Stage } from "@/lib/workflow";
import { waitCheckHooks } from "../gates/acks";
import { append, followUpOf, loadRun, workflowClock } from "./context";

/*
 * Starting: a slot of the user's concurrency limit (taken, given back while the run waits for a person, taken again
 * after), the run branch, and the start and end of each stage.
 */

/**
 * The per-user limit counts runs that are computing. A run waiting for a person (a gate, a question, a paused run
 * waiting for retry) holds no slot: five plans left waiting for days never block a sixth run.
 */
const COMPUTING: RunState["status"][] = ["running"];

/**
 * The user's computing runs: running, or waiting for a person that one of their parallel tasks asked while the other
 * tasks compute on (the run keeps its one slot however many tasks run; RunState.holdsSlot).
 */
function computingRuns(userId: string) {
  return and(
    eq(workflowRuns.userId, userId),
    or(inArray(workflowRuns.status, COMPUTING), sql`json_extract(${workflowRuns.state}, '$.holdsSlot') = 1`),
  );
}

/** The concurrency limit a run is admitted under: the server's per-user limit, or the run's own lower one. */
function concurrencyLimit(config: unknown): { limit: number; name: string } {
  const server = getEnv().MAX_CONCURRENT_RUNS_PER_USER;
  const own = (config as { limits?: { maxConcurrency?: number } } | null)?.limits?.maxConcurrency;
  return typeof own === "number" && own < server
    ? { limit: own, name: `this run's limits.maxConcurrency=${own}` }
    : { limit: server, name: `MAX_CONCURRENT_RUNS_PER_USER=${server}` };
}

/**
 * Start the run if its user is under MAX_CONCURRENT_RUNS_PER_USER computing runs; otherwise it stays queued. Checked
 * and written in one transaction, so two runs never take the last slot together.
 */
export async function tryStart({ runId, stepKey = "start" }: { runId: string; stepKey?: string }): Promise<{ started: boolean; status: string }> {
  const result = await write(async (tx): Promise<{ started: boolean; status: string }> => {
    const run = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
    const { limit } = concurrencyLimit(run.config);
    if (run.status !== "queued") return { started: run.status !== "cancelled" && run.status !== "failed", status: run.status };
    const [row] = await tx
      .select({ n: sql<number>`count(*)` })
      .from(workflowRuns)
      .where(computingRuns(run.userId));
    if ((row?.n ?? 0) >= limit) return { started: false, status: "queued" };
    await appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }], { stepKey });
    return { started: true, status: "running" };
  });
  if (!result.started && result.status === "queued") await waitCheckHooks.afterPending?.({ runId, key: "slot" });
  return result;
}

/**
 * Whether waking the user's queued runs is over: none of them could start now (there is none, or every one is at its
 * limit). The re-announcer repeats a `run/slot-freed` until then, because a run that read "full" just before a slot
 * freed stores its wait after the announcement, and Inngest's waits do not look back.
 */
export async function slotWakeSettled({ userId }: { userId: string }): Promise<boolean> {
  const db = await getDb();
  const queued = await db.query.workflowRuns.findMany({ where: and(eq(workflowRuns.userId, userId), eq(workflowRuns.status, "queued")) });
  if (queued.length === 0) return true;
  const [row] = await db
    .select({ n: sql<number>`count(*)` })
    .from(workflowRuns)
    .where(computingRuns(userId));
  return queued.every((run) => (row?.n ?? 0) >= concurrencyLimit(run.config).limit);
}

/**
 * After a wait for a person, before computing again: a run whose user already has the limit's worth of other runs
 * computing goes back to the queue (RUN_QUEUED, with the reason shown on its page) until a slot frees.
 */
export async function requeueIfFull({ runId, stepKey }: { runId: string; stepKey: string }): Promise<{ queued: boolean; userId: string }> {
  // The usual return from a wait finds the user under the limit: read as such without the write lock (a transaction
  // of its own through the write queue), since nothing is written then. A run that may have to queue is checked
  // again and requeued in one transaction, below. The read cannot let a run through that the transaction would queue:
  // this run already counts as computing for every other run's start (its decision made it running).
  const db = await getDb();
  const run = await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId), columns: { status: true, userId: true, config: true } });
  if (run && run.status !== "running") return { queued: false, userId: run.userId };
  if (run) {
    const [row] = await db
      .select({ n: sql<number>`count(*)` })
      .from(workflowRuns)
      .where(and(computingRuns(run.userId), ne(workflowRuns.id, runId)));
    if ((row?.n ?? 0) < concurrencyLimit(run.config).limit) return { queued: false, userId: run.userId };
  }
  return write(async (tx) => {
    const run = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
    const { limit, name } = concurrencyLimit(run.config);
    if (run.status !== "running") return { queued: false, userId: run.userId };
    const [row] = await tx
      .select({ n: sql<number>`count(*)` })
      .from(workflowRuns)
      .where(and(computingRuns(run.userId), ne(workflowRuns.id, runId)));
    const computing = row?.n ?? 0;
    if (computing < limit) return { queued: false, userId: run.userId };
    const reason = `Waiting for a free slot: ${computing} of this user's runs are computing (${name}).`;
    await appendEventsTx(tx, runId, [{ type: "RUN_QUEUED", payload: { reason } }], { stepKey });
    return { queued: true, userId: run.userId };
  });
}

export async function createBranch({ runId }: { runId: string }) {
  const run = await loadRun({ runId });
  const followUp = await followUpOf({ runId });
  const { branch, baseSha } = await createRunBranch({
    repoPath: run.repoPath,
    runId,
    request: run.request,
    branch: run.branch,
    baseBranch: run.config.git.baseBranch,
    ...(followUp ? { existingBranch: run.branch } : {}),
  });
  await append(runId, "branch", [{ type: "BRANCH_CREATED", payload: { branch, baseSha } }]);
  return { branch, baseSha };
}

export async function startStage({ runId, stage, stepKey, attempt }: { runId: string; stage: Stage; stepKey: string; attempt?: number }) {
  await append(runId, stepKey, [{ type: "STAGE_STARTED", payload: { stage, attempt } }]);
  return { now: workflowClock.now() };
}

export async function completeStage({ runId, stage, stepKey }: { runId: string; stage: Stage; stepKey: string }) {
  await append(runId, stepKey, [{ type: "STAGE_COMPLETED", payload: { stage } }]);
  return { now: workflowClock.now() };
}
