import { newUlid as ulid } from "@/lib/ids";
import { cancelRunInTx, DEDUPE_MS } from "./events";
import type { AppTarget } from "./protocol";
import { createRun, CRON_EVENT, getRegistry, nextCronTime, type RegisteredFunction, type Registry, type StoredEvent } from "./registry";
import { LEASED_COLUMNS, query, rows, TERMINAL_SQL, tx, type LeasedRun, type PendingRow, type Tx } from "./store";
import type { Executor } from "./executor";

/**
 * Scheduling and leases: which runs this executor drives, and when. The poll (due runs, run timeouts, cron triggers,
 * pruning, sync retries), waking runs (at once, at a time, when a blocked run frees a slot), leases (acquiring,
 * renewing, the guarded write that holds only under the lease) and the hand-off of runs an ingest made runnable.
 * Driving a run is dispatch.ts's; this module reaches it through the executor (pump → executor.drive), not an import.
 */

export class LeaseLost extends Error {
  constructor(runId: string) {
    super(`lease on run ${runId} lost`);
  }
}

export const FAR_FUTURE = 8_640_000_000_000_000;

/** Runs due now that nobody holds (tests/executor/run-indexes.test.ts holds it to the status index). */
export const DUE_SQL = `SELECT id FROM executor_runs WHERE status IN ('queued','sleeping','waiting','running') AND next_at <= ?
  AND lease_until < ? ORDER BY next_at LIMIT ?`;

/**
 * Take a run's lease (?1 worker, ?2 lease end, ?3 run, ?4 now, ?5/?6 concurrency limits of the two constraints, ?7 the
 * function has priority, ?8 its finish timeout), if it is due, free, and within its concurrency and priority limits.
 * Its subqueries use the partial concurrency and unstarted-run indexes (tests/executor/run-indexes.test.ts).
 */
export const ACQUIRE_SQL = `UPDATE executor_runs SET lease_owner = ?1, lease_until = ?2, status = 'running', generation = generation + 1,
      gather_key = NULL,
      timeout_at = CASE WHEN generation = 0 THEN (CASE WHEN ?8 IS NULL THEN NULL ELSE ?4 + ?8 END) ELSE timeout_at END
    WHERE id = ?3 AND status IN ('queued','sleeping','waiting','running') AND lease_until < ?4 AND next_at <= ?4
      AND (?5 IS NULL OR (SELECT count(*) FROM executor_runs r2 WHERE r2.lease_until >= ?4 AND r2.id <> executor_runs.id
           AND (r2.concurrency_key = executor_runs.concurrency_key OR r2.concurrency_key2 = executor_runs.concurrency_key)) < ?5)
      AND (?6 IS NULL OR (SELECT count(*) FROM executor_runs r2 WHERE r2.lease_until >= ?4 AND r2.id <> executor_runs.id
           AND (r2.concurrency_key = executor_runs.concurrency_key2 OR r2.concurrency_key2 = executor_runs.concurrency_key2)) < ?6)
      AND (?7 = 0 OR generation > 0 OR NOT EXISTS (SELECT 1 FROM executor_runs r3 WHERE r3.fn_id = executor_runs.fn_id
           AND r3.id <> executor_runs.id AND r3.concurrency_key IS executor_runs.concurrency_key AND r3.status = 'queued'
           AND r3.generation = 0 AND r3.lease_until < ?4 AND r3.next_at <= ?4
           AND (r3.created_at - r3.priority < executor_runs.created_at - executor_runs.priority
                OR (r3.created_at - r3.priority = executor_runs.created_at - executor_runs.priority AND r3.id < executor_runs.id))))
    RETURNING ${LEASED_COLUMNS.join(", ")}`;

/** Executors started in this process: events ingested here wake their runs at once instead of at the next poll. */
export const localExecutors = new Set<Executor>();

export function wakeLocal(runIds: string[]): void {
  if (runIds.length === 0) return;
  for (const executor of localExecutors) executor.wake(runIds);
}

/**
 * Hand-off: runs an ingest made runnable (a wait it resolved, a run it started) are leased by one of this process's
 * executors in that ingest's own transaction, with the very UPDATE acquire() runs (due, free, within concurrency and
 * priority), so the lease commits with the event and the executor drives them at once, without reading each run and
 * committing its lease in a transaction of its own. `drop` undoes the bookkeeping when that transaction did not commit.
 */
export const localHandoff = {
  async take(t: Tx, runIds: string[], registry: Registry, now: number, fns?: Map<string, string>): Promise<string[]> {
    for (const executor of localExecutors) {
      const taken = await executor.takeInTx(t, runIds, registry, now, fns);
      if (taken.length > 0) return taken;
    }
    return [];
  },
  drop(runIds: string[]): void {
    for (const executor of localExecutors) executor.dropTaken(runIds);
  },
};

/** A run this executor holds the lease of, as dispatch and waits act on it. */
export type Ctx = {
  run: LeasedRun;
  fn: RegisteredFunction;
  target: AppTarget;
  event: StoredEvent;
  events: unknown[];
  /** The execution version the app's latest reply reported in this drive (null: none yet; the SDK's default is 2). */
  requestVersion: number | null;
};

export type GuardedTx = Tx & { woken: string[] };

/** A run's state as one iteration of the drive loop loaded it (dispatch.ts loadState). */
export type State = {
  status: string;
  steps: Map<string, unknown>;
  stack: string[];
  pending: PendingRow[];
  attempt: number;
  parallel: boolean;
  stateBytes: number;
};

/** Ask this process to look at runs now (after ingesting events that woke them, for example). */
export function wake(ex: Executor, runIds: Iterable<string>): void {
  if (!ex.running) return;
  for (const id of runIds) {
    if (ex.driving.has(id)) {
      ex.rewake.add(id);
      // The drive loop may be waiting on steps of another branch: it looks again now (dispatch.ts loop).
      ex.signals.get(id)?.();
    } else ex.ready.add(id);
  }
  pump(ex);
}

/**
 * Another process committed to the database (lib/db onForeignCommit): the runs it made due — a wait its event resolved,
 * a run it started, with no executor of its own to hand them to — are driven now, not at the next poll. Only the due
 * runs are read (the poll's other work keeps its pace); a commit that lands while a look is running gets one more.
 */
export function pollDue(ex: Executor): void {
  if (!ex.running) return;
  if (ex.duePolling) {
    ex.dueAgain = true;
    return;
  }
  ex.duePolling = true;
  void (async () => {
    try {
      do {
        ex.dueAgain = false;
        const now = Date.now();
        const due = await query<{ id: string }>(DUE_SQL, [now, now, ex.opts.maxConcurrentRuns * 2]);
        for (const { id } of due) if (!ex.driving.has(id)) ex.ready.add(id);
        pump(ex);
      } while (ex.dueAgain && ex.running);
    } catch (err) {
      ex.opts.log("error", "looking for runs made due by another process failed", err);
    } finally {
      ex.duePolling = false;
    }
  })();
}

export function schedulePoll(ex: Executor, delay: number): void {
  if (!ex.running) return;
  clearTimeout(ex.pollTimer);
  ex.pollTimer = setTimeout(() => void poll(ex), delay);
  ex.pollTimer.unref?.();
}

async function poll(ex: Executor): Promise<void> {
  if (!ex.running || ex.polling) return;
  ex.polling = true;
  try {
    const now = Date.now();
    const due = await query<{ id: string }>(DUE_SQL, [now, now, ex.opts.maxConcurrentRuns * 2]);
    for (const { id } of due) if (!ex.driving.has(id)) ex.ready.add(id);
    pump(ex);
    // Each on its own: a failure here must not hold up pruning and sync retries below.
    await expireTimeouts(ex, now).catch((err) => ex.opts.log("error", "expiring run timeouts failed", err));
    await fireCrons(ex).catch((err) => ex.opts.log("error", "firing cron triggers failed", err));
    if (now - ex.lastPrune > 60_000) {
      // Events are kept for the 24 h id-dedupe window (and for waits looking back); older ones go, and so do the rate
      // limit and throttle states of keys idle for a day (a cron's next due time stays).
      ex.lastPrune = now;
      await tx(async (t) => {
        await t.execute({ sql: "DELETE FROM executor_events WHERE received_at < ?", args: [now - DEDUPE_MS] });
        await t.execute({ sql: "DELETE FROM executor_flow WHERE kind <> 'cron' AND at < ?", args: [now - DEDUPE_MS] });
      });
    }
    const unsynced = await query<{ url: string }>("SELECT url FROM executor_apps WHERE last_error IS NOT NULL");
    for (const { url } of unsynced) {
      const target = ex.targets.get(url);
      const failed = ex.syncFailures.get(url);
      if (target && (!failed || failed.nextAt <= now)) {
        // Hold the next try until this one is done, so a slow endpoint is not synced twice at once.
        if (failed) failed.nextAt = FAR_FUTURE;
        void ex.syncOne(target);
      }
    }
  } catch (err) {
    ex.opts.log("error", "poll failed", err);
  } finally {
    ex.polling = false;
    schedulePoll(ex, ex.opts.pollMs);
  }
}

/** `timeouts`: a run still not started by its start timeout, or not finished by its finish timeout, is cancelled. */
async function expireTimeouts(ex: Executor, now: number): Promise<void> {
  const expired = await query<{ id: string }>(
    `SELECT id FROM executor_runs WHERE timeout_at IS NOT NULL AND timeout_at <= ? AND status NOT IN ${TERMINAL_SQL} LIMIT 100`,
    [now],
  );
  if (expired.length === 0) return;
  const registry = await getRegistry();
  const woken = await tx(async (t) => {
    const woken: string[] = [];
    for (const { id } of expired) {
      // Re-checked in the write: the run may have started (new deadline) or finished since the read.
      const [still] = await rows<{ id: string }>(
        t,
        `SELECT id FROM executor_runs WHERE id = ? AND timeout_at IS NOT NULL AND timeout_at <= ? AND status NOT IN ${TERMINAL_SQL}`,
        [id, now],
      );
      if (still) woken.push(...(await cancelRunInTx(t, id, now, registry)));
    }
    return woken;
  });
  wake(ex, woken);
}

/**
 * Cron triggers: each (function, cron) has its next due time in executor_flow. A due one starts one run and moves
 * on, compare-and-set in one write transaction, so a restart neither misses nor repeats a due time and two processes
 * on one database start it once. Due times missed while no executor ran start one catch-up run, not one per miss.
 */
async function fireCrons(ex: Executor): Promise<void> {
  const registry = await getRegistry();
  const crons = [...registry.byId.values()].flatMap((fn) => fn.flow.crons.map((cron) => ({ fn, cron })));
  if (crons.length === 0) return;
  const now = ex.opts.now();
  // Most polls find nothing due: read first, and open a write transaction only when something is.
  const stored = await query<{ fn_id: string; key: string; at: number }>("SELECT fn_id, key, at FROM executor_flow WHERE kind = 'cron'");
  const dueAt = new Map(stored.map((r) => [`${r.fn_id}\n${r.key}`, Number(r.at)]));
  if (crons.every(({ fn, cron }) => (dueAt.get(`${fn.id}\n${cron.expression}`) ?? 0) > now)) return;
  const woken = await tx(async (t) => {
    const woken: string[] = [];
    for (const { fn, cron } of crons) {
      const [row] = await rows<{ at: number }>(t, "SELECT at FROM executor_flow WHERE fn_id = ? AND kind = 'cron' AND key = ?", [fn.id, cron.expression]);
      if (row && Number(row.at) > now) continue;
      if (row) {
        const dueAt = Number(row.at);
        const event: StoredEvent = { id: `cron-${fn.id}-${dueAt}`, name: CRON_EVENT, data: { cron: cron.expression }, ts: dueAt };
        const [top] = await rows<{ s: number | null }>(t, "SELECT max(seq) AS s FROM executor_events");
        const runId = await createRun(t, { fn, event, runId: ulid(), now: Date.now(), watermark: Number(top?.s ?? 0) });
        if (runId) woken.push(runId);
      }
      const next = nextCronTime(cron, now) ?? FAR_FUTURE;
      await t.execute({
        sql: `INSERT INTO executor_flow (fn_id, kind, key, at) VALUES (?, 'cron', ?, ?) ON CONFLICT DO UPDATE SET at = excluded.at`,
        args: [fn.id, cron.expression, next],
      });
    }
    return woken;
  });
  wake(ex, woken);
}

function pump(ex: Executor): void {
  for (const id of ex.ready) {
    // A handed-off run holds its lease already, and its slot was counted when it was taken.
    const handed = ex.handedOff.has(id);
    if (!handed && ex.driving.size + ex.handedOff.size >= ex.opts.maxConcurrentRuns) continue;
    ex.ready.delete(id);
    if (ex.driving.has(id)) continue;
    ex.driving.add(id);
    void ex.drive(id).finally(() => {
      ex.driving.delete(id);
      if (ex.rewake.delete(id)) ex.ready.add(id);
      pump(ex);
    });
  }
}

export function wakeAt(ex: Executor, runId: string, at: number): void {
  const delay = at - Date.now();
  if (delay > ex.opts.pollMs) return; // the poll will find it
  const timer = setTimeout(() => {
    ex.timers.delete(timer);
    wake(ex, [runId]);
  }, Math.max(0, delay));
  ex.timers.add(timer);
}

export async function renewLeases(ex: Executor): Promise<void> {
  if (ex.driving.size === 0 && ex.handedOff.size === 0) return;
  const ids = [...ex.driving, ...ex.handedOff.keys()];
  try {
    await tx((t) =>
      t.execute({
        sql: `UPDATE executor_runs SET lease_until = ? WHERE lease_owner = ? AND id IN (${ids.map(() => "?").join(",")})`,
        args: [Date.now() + ex.opts.leaseMs, ex.workerId, ...ids],
      }),
    );
  } catch (err) {
    ex.opts.log("error", "lease renewal failed", err);
  }
}

/** ACQUIRE_SQL's arguments for a run of `fn` (undefined: not registered; the run is then failed once leased). */
export function acquireArgs(ex: Executor, fn: RegisteredFunction | undefined, runId: string, now: number): (string | number | null)[] {
  // Every concurrency constraint is enforced: runs holding a lease (running a step now) with the same key, in either
  // constraint column (scope env/account keys are shared across functions), count against its limit.
  const limit1 = fn?.concurrency[0]?.limit ?? null;
  const limit2 = fn?.concurrency[1]?.limit ?? null;
  // Priority: a run not started yet waits while a run of the same key that is due, and ranks higher (created
  // earlier, or with more priority seconds), is also waiting to start.
  const prioritized = fn?.flow.priority !== undefined ? 1 : 0;
  const finishMs = fn?.flow.timeouts?.finishMs ?? null;
  return [ex.workerId, now + ex.opts.leaseMs, runId, now, limit1, limit2, prioritized, finishMs];
}

/**
 * localHandoff's take: lease, inside the ingest's transaction `t`, the runs it made runnable, as many as this
 * executor has free slots for. A run it drives already, or one ACQUIRE_SQL refuses (not due, leased elsewhere, over
 * a concurrency limit, behind a higher priority) is left to wake() and acquire(), as before.
 */
export async function takeInTx(
  ex: Executor,
  t: Tx,
  runIds: string[],
  registry: Registry,
  now: number,
  /** The function of a run, where the ingest knows it (it is read otherwise). */
  fns?: Map<string, string>,
): Promise<string[]> {
  const taken: string[] = [];
  if (!ex.running) return taken;
  for (const id of new Set(runIds)) {
    if (ex.driving.size + ex.handedOff.size >= ex.opts.maxConcurrentRuns) break;
    if (ex.driving.has(id) || ex.handedOff.has(id)) continue;
    const fnId = fns?.get(id) ?? (await rows<{ fn_id: string }>(t, "SELECT fn_id FROM executor_runs WHERE id = ?", [id]))[0]?.fn_id;
    const fn = fnId === undefined ? undefined : registry.byId.get(fnId);
    if (!fn) continue;
    const [run] = await rows<LeasedRun>(t, ACQUIRE_SQL, acquireArgs(ex, fn, id, now));
    if (!run) continue;
    ex.handedOff.set(id, { run, fn });
    taken.push(id);
  }
  return taken;
}

export function unblock(ex: Executor, fnId: string): void {
  const set = ex.blocked.get(fnId);
  if (!set || set.size === 0) return;
  ex.blocked.delete(fnId);
  wake(ex, set);
}

/**
 * A write that only happens while we still hold the lease and the run is live. It acts on a call's reply, so it
 * also moves the dispatch generation on: checkpoints still arriving from that call are stale from here.
 */
export async function guarded<T>(
  ex: Executor,
  ctx: Ctx,
  fn: (t: GuardedTx) => Promise<T>,
  opts: { resetAttempt?: boolean; parallel?: boolean } = {},
): Promise<T> {
  const { value, woken } = await tx(async (t) => {
    const ok = await t.execute({
      sql: `UPDATE executor_runs SET generation = generation + 1, attempt = CASE WHEN ?1 THEN 0 ELSE attempt END,
              parallel = coalesce(?2, parallel)
            WHERE id = ?3 AND lease_owner = ?4 AND status = 'running'`,
      args: [opts.resetAttempt ? 1 : 0, opts.parallel === undefined ? null : opts.parallel ? 1 : 0, ctx.run.id, ex.workerId],
    });
    if (ok.rowsAffected === 0) throw new LeaseLost(ctx.run.id);
    const woken: string[] = [];
    const value = await fn(Object.assign(t, { woken }));
    return { value, woken };
  });
  ctx.run.generation += 1;
  if (woken.length > 0) wake(ex, woken);
  return value;
}
