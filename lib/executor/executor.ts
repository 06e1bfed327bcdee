import { randomUUID } from "node:crypto";
import { getEnv } from "@/lib/env";
import { newUlid as ulid } from "@/lib/ids";
import { waitMatchKey, type WaitMatchKey } from "./cel";
import { dispatchToken, MAX_RUN_STATE_BYTES, MAX_STEP_OUTPUT_BYTES } from "./checkpoint";
import { cancelRunInTx, DEDUPE_MS, hasListeners, ingestInTx, recordEntry, resolvePending, resolveWaitFromHistory } from "./events";
import {
  callFunction,
  protocolError,
  sleepUntil,
  deadline,
  syncApp,
  toSerializedError,
  type AppTarget,
  type CallBody,
  type CallOutcome,
  type OutgoingOp,
  type SerializedError,
} from "./protocol";
import {
  checkFunctionConfig,
  createRun,
  CRON_EVENT,
  FAILURE_EVENT,
  FINISHED_EVENT,
  nextCronTime,
  getRegistry,
  INVOKE_EVENT,
  invalidateRegistry,
  type RegisteredFunction,
  type Registry,
  type StoredEvent,
  UnsupportedOptionError,
} from "./registry";
import { query, rows, TERMINAL_SQL, tx, type PendingRow, type RunRow, type Tx } from "./store";

/**
 * The embedded executor: drives the functions of any Inngest app (serve URL, or in-process handler) through the
 * SDK's request/206 protocol, with all run state in the database. A worker drives a run only while it holds the
 * run's lease, so several executor processes can share one database.
 */

export type ExecutorOptions = {
  apps: AppTarget[];
  /** Unique per process; defaults to a random id. */
  workerId?: string;
  /** How long a lease lasts without renewal; a crashed worker's runs are picked up after this. */
  leaseMs?: number;
  /** How often the database is polled for due timers and runs left by other processes. */
  pollMs?: number;
  /** Timeout of one call to a serve endpoint. */
  requestTimeoutMs?: number;
  /** Delay before retry `attempt` (0-based). Default: exponential from 1 s, capped at 1 h, with jitter. */
  backoff?: (attempt: number) => number;
  /** Runs this process drives at once. */
  maxConcurrentRuns?: number;
  log?: (level: "info" | "warn" | "error", message: string, extra?: unknown) => void;
  /**
   * Whether a new wait also matches events ingested since the run reached it (default true, see resolveWaitFromHistory).
   * false gives Inngest's semantics: a wait matches only events ingested after it was stored.
   */
  waitLookBack?: boolean;
  /** Called after a run's final state is committed (metrics, benchmarks). */
  onRunFinished?: (run: { id: string; fnId: string; status: "completed" | "failed" }) => void;
  /**
   * "cloud": behave as Inngest Cloud where the embedded executor is otherwise more lenient: waits do not look back
   * (inngest/inngest#1433), and the step count, event size and call duration are limited with Cloud's errors.
   * Default: GATEHOUSE_EXECUTOR_STRICT.
   */
  strict?: "cloud" | null;
  /** Overrides of Cloud's limits (tests use small ones). Step output and run state apply in every mode. */
  limits?: Partial<CloudLimits>;
  /** The clock cron triggers are scheduled by (tests move it; everything else uses real time). */
  now?: () => number;
};

/** Inngest Cloud's limits (the event size and call duration as configured: GATEHOUSE_EXECUTOR_MAX_*). */
export type CloudLimits = {
  maxStepOutputBytes: number;
  maxRunStateBytes: number;
  maxSteps: number;
  maxEventBytes: number;
  maxStepDurationMs: number;
};

export function cloudLimits(overrides: Partial<CloudLimits> = {}): CloudLimits {
  const env = getEnv();
  return {
    maxStepOutputBytes: MAX_STEP_OUTPUT_BYTES,
    maxRunStateBytes: MAX_RUN_STATE_BYTES,
    maxSteps: 1000,
    maxEventBytes: env.GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES,
    maxStepDurationMs: env.GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS * 1000,
    ...overrides,
  };
}

/** An error as Inngest Cloud stores it for a run it failed (`{error, name, message}`). */
export function cloudError(name: string, message: string): SerializedError {
  return { name, message, error: `${name}: ${message}` };
}

export type ExecutorStatus = {
  workerId: string;
  running: boolean;
  inFlight: number;
  apps: { url: string; appId: string | null; functions: number; syncedAt: number | null; error: string | null }[];
};

class LeaseLost extends Error {
  constructor(runId: string) {
    super(`lease on run ${runId} lost`);
  }
}

const FAR_FUTURE = 8_640_000_000_000_000;

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
    RETURNING *`;

/** Executors started in this process: events ingested here wake their runs at once instead of at the next poll. */
const localExecutors = new Set<Executor>();

/** The event size limit in effect for events ingested in this process: strict mode's, if any executor here is strict. */
export function strictEventLimit(): number | null {
  for (const executor of localExecutors) if (executor.strict) return executor.limits.maxEventBytes;
  return getEnv().GATEHOUSE_EXECUTOR_STRICT ? cloudLimits().maxEventBytes : null;
}

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
  async take(t: Tx, runIds: string[], registry: Registry, now: number): Promise<string[]> {
    for (const executor of localExecutors) {
      const taken = await executor.takeInTx(t, runIds, registry, now);
      if (taken.length > 0) return taken;
    }
    return [];
  },
  drop(runIds: string[]): void {
    for (const executor of localExecutors) executor.dropTaken(runIds);
  },
};

export function defaultBackoff(attempt: number): number {
  const base = Math.min(3_600_000, 1000 * 2 ** attempt);
  return Math.round(base * (0.75 + Math.random() * 0.5));
}

type Ctx = {
  run: RunRow;
  fn: RegisteredFunction;
  target: AppTarget;
  event: StoredEvent;
  events: unknown[];
};

type GuardedTx = Tx & { woken: string[] };

/** A run that made no progress (its app reported only what is already recorded) is retried this often, then failed. */
export const NO_PROGRESS_LIMIT = 4;

type State = {
  status: string;
  steps: Map<string, unknown>;
  stack: string[];
  pending: PendingRow[];
  attempt: number;
  parallel: boolean;
  stateBytes: number;
};

export class Executor {
  readonly workerId: string;
  readonly strict: "cloud" | null;
  readonly limits: CloudLimits;
  private readonly opts: Required<Omit<ExecutorOptions, "apps" | "workerId" | "strict" | "limits">>;
  private readonly targets = new Map<string, AppTarget>();
  private readonly ready = new Set<string>();
  private readonly driving = new Set<string>();
  private readonly rewake = new Set<string>();
  /** Runs whose lease this executor took in an ingest's transaction (localHandoff), to drive without acquire(). */
  private readonly handedOff = new Map<string, { run: RunRow; fn: RegisteredFunction }>();
  private readonly blocked = new Map<string, Set<string>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Apps whose last sync failed: when to try again (exponential backoff) and the error already logged. */
  private readonly syncFailures = new Map<string, { failures: number; nextAt: number; logged: string }>();
  private pollTimer?: NodeJS.Timeout;
  private leaseTimer?: NodeJS.Timeout;
  private running = false;
  private polling = false;
  private lastPrune = 0;
  private stopped?: Promise<void>;

  constructor(options: ExecutorOptions) {
    this.workerId = options.workerId ?? `worker-${randomUUID()}`;
    this.strict = options.strict === undefined ? getEnv().GATEHOUSE_EXECUTOR_STRICT : options.strict;
    this.limits = cloudLimits(options.limits);
    this.opts = {
      leaseMs: options.leaseMs ?? 5_000,
      pollMs: options.pollMs ?? 500,
      requestTimeoutMs: options.requestTimeoutMs ?? 300_000,
      backoff: options.backoff ?? defaultBackoff,
      maxConcurrentRuns: options.maxConcurrentRuns ?? 200,
      log: options.log ?? ((level, message, extra) => console[level](`[executor] ${message}`, extra ?? "")),
      onRunFinished: options.onRunFinished ?? (() => undefined),
      now: options.now ?? Date.now,
      waitLookBack: options.waitLookBack ?? true,
    };
    for (const app of options.apps) this.addApp(app);
  }

  /** Sync every app, then start driving runs. Sync failures are stored and retried; they do not stop the start. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    localExecutors.add(this);
    await this.syncAll();
    this.leaseTimer = setInterval(() => void this.renewLeases(), Math.max(50, Math.floor(this.opts.leaseMs / 3)));
    this.schedulePoll(0);
  }

  async stop(): Promise<void> {
    this.running = false;
    localExecutors.delete(this);
    clearTimeout(this.pollTimer);
    clearInterval(this.leaseTimer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.ready.clear();
    // Leases taken in an ingest but not driven yet go back at once (else another process waits for them to expire).
    const handed = [...this.handedOff.values()];
    this.handedOff.clear();
    await Promise.all(handed.map(({ run }) => this.release(run, "queued", 0).catch(() => undefined)));
    // Let in-flight drives notice; their leases expire if they cannot finish.
    const deadline = Date.now() + 5000;
    while (this.driving.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }

  addApp(app: AppTarget): void {
    // Gatehouse's own app (GATEHOUSE_PUBLIC_URL/api/inngest) checkpoints through its client's fetch straight into this
    // database (inngest/client.ts), wherever its executor runs; other apps only when their target says so.
    const own = app.checkpointing === undefined && app.url.split("?")[0] === `${getEnv().publicUrl}/api/inngest`;
    this.targets.set(app.url, own ? { ...app, checkpointing: true } : app);
  }

  async syncAll(): Promise<void> {
    await Promise.all([...this.targets.values()].map((target) => this.syncOne(target)));
  }

  async syncOne(target: AppTarget): Promise<boolean> {
    try {
      const { appId, functions } = await syncApp({ target, timeoutMs: 30_000 });
      // An option this executor cannot honour fails the sync (naming the function and option), before anything is stored.
      for (const f of functions) checkFunctionConfig(f);
      await tx(async (t) => {
        // An app id lives at one URL: a re-sync from elsewhere (the app moved) replaces the old registration.
        await t.execute({ sql: "DELETE FROM executor_apps WHERE app_id = ? AND url <> ?", args: [appId, target.url] });
        await t.execute({
          sql: `INSERT INTO executor_apps (url, app_id, functions, synced_at, last_error) VALUES (?, ?, ?, ?, NULL)
                ON CONFLICT(url) DO UPDATE SET app_id = excluded.app_id, functions = excluded.functions,
                  synced_at = excluded.synced_at, last_error = NULL`,
          args: [target.url, appId, JSON.stringify(functions), Date.now()],
        });
      });
      invalidateRegistry();
      if (this.syncFailures.delete(target.url)) this.opts.log("info", `sync of ${target.url} succeeded again`);
      return true;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      // Retried with backoff (1 s doubling to 5 min); the same error is logged once, not on every retry.
      const previous = this.syncFailures.get(target.url);
      const failures = (previous?.failures ?? 0) + 1;
      const retryIn = Math.min(300_000, 1000 * 2 ** (failures - 1));
      this.syncFailures.set(target.url, { failures, nextAt: Date.now() + retryIn, logged: message });
      if (previous?.logged !== message) this.opts.log("warn", `sync of ${target.url} failed (retrying with backoff): ${message}`);
      // A refused option also unregisters the app's functions: keeping the previous registration would run the new code
      // with the option silently ignored. (An unreachable app keeps its registration: its functions did not change.)
      const refused = err instanceof UnsupportedOptionError;
      await tx((t) =>
        t.execute({
          sql: `INSERT INTO executor_apps (url, last_error) VALUES (?, ?) ON CONFLICT(url) DO UPDATE SET last_error = excluded.last_error,
                  functions = CASE WHEN ? THEN '[]' ELSE executor_apps.functions END`,
          args: [target.url, message, refused ? 1 : 0],
        }),
      ).catch(() => undefined);
      invalidateRegistry();
      return false;
    }
  }

  async status(): Promise<ExecutorStatus> {
    const apps = await query<{ url: string; app_id: string | null; functions: string; synced_at: number | null; last_error: string | null }>(
      "SELECT url, app_id, functions, synced_at, last_error FROM executor_apps ORDER BY url",
    );
    return {
      workerId: this.workerId,
      running: this.running,
      inFlight: this.driving.size,
      apps: apps.map((a) => ({
        url: a.url,
        appId: a.app_id,
        functions: (JSON.parse(a.functions) as unknown[]).length,
        syncedAt: a.synced_at,
        error: a.last_error,
      })),
    };
  }

  /** Ask this process to look at runs now (after ingesting events that woke them, for example). */
  wake(runIds: Iterable<string>): void {
    if (!this.running) return;
    for (const id of runIds) {
      if (this.driving.has(id)) this.rewake.add(id);
      else this.ready.add(id);
    }
    this.pump();
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Scheduling

  private schedulePoll(delay: number): void {
    if (!this.running) return;
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => void this.poll(), delay);
    this.pollTimer.unref?.();
  }

  private async poll(): Promise<void> {
    if (!this.running || this.polling) return;
    this.polling = true;
    try {
      const now = Date.now();
      const due = await query<{ id: string }>(DUE_SQL, [now, now, this.opts.maxConcurrentRuns * 2]);
      for (const { id } of due) if (!this.driving.has(id)) this.ready.add(id);
      this.pump();
      // Each on its own: a failure here must not hold up pruning and sync retries below.
      await this.expireTimeouts(now).catch((err) => this.opts.log("error", "expiring run timeouts failed", err));
      await this.fireCrons().catch((err) => this.opts.log("error", "firing cron triggers failed", err));
      if (now - this.lastPrune > 60_000) {
        // Events are kept for the 24 h id-dedupe window (and for waits looking back); older ones go, and so do the rate
        // limit and throttle states of keys idle for a day (a cron's next due time stays).
        this.lastPrune = now;
        await tx(async (t) => {
          await t.execute({ sql: "DELETE FROM executor_events WHERE received_at < ?", args: [now - DEDUPE_MS] });
          await t.execute({ sql: "DELETE FROM executor_flow WHERE kind <> 'cron' AND at < ?", args: [now - DEDUPE_MS] });
        });
      }
      const unsynced = await query<{ url: string }>("SELECT url FROM executor_apps WHERE last_error IS NOT NULL");
      for (const { url } of unsynced) {
        const target = this.targets.get(url);
        const failed = this.syncFailures.get(url);
        if (target && (!failed || failed.nextAt <= now)) {
          // Hold the next try until this one is done, so a slow endpoint is not synced twice at once.
          if (failed) failed.nextAt = FAR_FUTURE;
          void this.syncOne(target);
        }
      }
    } catch (err) {
      this.opts.log("error", "poll failed", err);
    } finally {
      this.polling = false;
      this.schedulePoll(this.opts.pollMs);
    }
  }

  /** `timeouts`: a run still not started by its start timeout, or not finished by its finish timeout, is cancelled. */
  private async expireTimeouts(now: number): Promise<void> {
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
    this.wake(woken);
  }

  /**
   * Cron triggers: each (function, cron) has its next due time in executor_flow. A due one starts one run and moves
   * on, compare-and-set in one write transaction, so a restart neither misses nor repeats a due time and two processes
   * on one database start it once. Due times missed while no executor ran start one catch-up run, not one per miss.
   */
  private async fireCrons(): Promise<void> {
    const registry = await getRegistry();
    const crons = [...registry.byId.values()].flatMap((fn) => fn.flow.crons.map((cron) => ({ fn, cron })));
    if (crons.length === 0) return;
    const now = this.opts.now();
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
    this.wake(woken);
  }

  private pump(): void {
    for (const id of this.ready) {
      // A handed-off run holds its lease already, and its slot was counted when it was taken.
      const handed = this.handedOff.has(id);
      if (!handed && this.driving.size + this.handedOff.size >= this.opts.maxConcurrentRuns) continue;
      this.ready.delete(id);
      if (this.driving.has(id)) continue;
      this.driving.add(id);
      void this.drive(id).finally(() => {
        this.driving.delete(id);
        if (this.rewake.delete(id)) this.ready.add(id);
        this.pump();
      });
    }
  }

  private wakeAt(runId: string, at: number): void {
    const delay = at - Date.now();
    if (delay > this.opts.pollMs) return; // the poll will find it
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake([runId]);
    }, Math.max(0, delay));
    this.timers.add(timer);
  }

  private async renewLeases(): Promise<void> {
    if (this.driving.size === 0 && this.handedOff.size === 0) return;
    const ids = [...this.driving, ...this.handedOff.keys()];
    try {
      await tx((t) =>
        t.execute({
          sql: `UPDATE executor_runs SET lease_until = ? WHERE lease_owner = ? AND id IN (${ids.map(() => "?").join(",")})`,
          args: [Date.now() + this.opts.leaseMs, this.workerId, ...ids],
        }),
      );
    } catch (err) {
      this.opts.log("error", "lease renewal failed", err);
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Driving one run

  private async acquire(runId: string): Promise<{ run: RunRow; fn: RegisteredFunction } | null> {
    const registry = await getRegistry();
    const now = Date.now();
    // Only what deciding needs: the whole row (its event and events JSON among them) comes back from the UPDATE.
    const candidate = await query<Pick<RunRow, "fn_id" | "status" | "next_at">>("SELECT fn_id, status, next_at FROM executor_runs WHERE id = ?", [runId]);
    const row = candidate[0];
    if (!row) return null;
    const fn = registry.byId.get(row.fn_id);
    const limited = (fn?.concurrency[0]?.limit ?? null) !== null || (fn?.concurrency[1]?.limit ?? null) !== null;
    const prioritized = fn?.flow.priority !== undefined;
    const acquired = await tx((t) => rows<RunRow>(t, ACQUIRE_SQL, this.acquireArgs(fn, runId, now)));
    const run = acquired[0];
    if (!run) {
      // A throttled, debounced or batching run woken by its event before it is due: its timer, not the next poll.
      if (row.next_at > now) this.wakeAt(runId, Number(row.next_at));
      if ((limited || prioritized) && row.status !== "completed") {
        const set = this.blocked.get(row.fn_id) ?? new Set();
        set.add(runId);
        this.blocked.set(row.fn_id, set);
      }
      return null;
    }
    if (!fn) {
      await this.finish(run, "failed", null, protocolError(`Function "${run.fn_id}" is not registered by any synced app`));
      return null;
    }
    return { run, fn };
  }

  /** ACQUIRE_SQL's arguments for a run of `fn` (undefined: not registered; the run is then failed once leased). */
  private acquireArgs(fn: RegisteredFunction | undefined, runId: string, now: number): (string | number | null)[] {
    // Every concurrency constraint is enforced: runs holding a lease (running a step now) with the same key, in either
    // constraint column (scope env/account keys are shared across functions), count against its limit.
    const limit1 = fn?.concurrency[0]?.limit ?? null;
    const limit2 = fn?.concurrency[1]?.limit ?? null;
    // Priority: a run not started yet waits while a run of the same key that is due, and ranks higher (created
    // earlier, or with more priority seconds), is also waiting to start.
    const prioritized = fn?.flow.priority !== undefined ? 1 : 0;
    const finishMs = fn?.flow.timeouts?.finishMs ?? null;
    return [this.workerId, now + this.opts.leaseMs, runId, now, limit1, limit2, prioritized, finishMs];
  }

  /**
   * localHandoff's take: lease, inside the ingest's transaction `t`, the runs it made runnable, as many as this
   * executor has free slots for. A run it drives already, or one ACQUIRE_SQL refuses (not due, leased elsewhere, over
   * a concurrency limit, behind a higher priority) is left to wake() and acquire(), as before.
   */
  async takeInTx(t: Tx, runIds: string[], registry: Registry, now: number): Promise<string[]> {
    const taken: string[] = [];
    if (!this.running) return taken;
    for (const id of new Set(runIds)) {
      if (this.driving.size + this.handedOff.size >= this.opts.maxConcurrentRuns) break;
      if (this.driving.has(id) || this.handedOff.has(id)) continue;
      const [row] = await rows<{ fn_id: string }>(t, "SELECT fn_id FROM executor_runs WHERE id = ?", [id]);
      const fn = row ? registry.byId.get(row.fn_id) : undefined;
      if (!fn) continue;
      const [run] = await rows<RunRow>(t, ACQUIRE_SQL, this.acquireArgs(fn, id, now));
      if (!run) continue;
      this.handedOff.set(id, { run, fn });
      taken.push(id);
    }
    return taken;
  }

  /** The ingest that took these runs did not commit: no lease of theirs was written. */
  dropTaken(runIds: string[]): void {
    for (const id of runIds) this.handedOff.delete(id);
  }

  private async drive(runId: string): Promise<void> {
    let acquired: Awaited<ReturnType<Executor["acquire"]>>;
    const handed = this.handedOff.get(runId);
    try {
      if (handed) this.handedOff.delete(runId);
      acquired = handed ?? (await this.acquire(runId));
    } catch (err) {
      this.opts.log("error", `acquiring run ${runId} failed`, err);
      return;
    }
    if (!acquired) return;
    const { run, fn } = acquired;
    const event = JSON.parse(run.event) as StoredEvent;
    const ctx: Ctx = { run, fn, target: this.targets.get(run.app_url) ?? { url: run.app_url }, event, events: JSON.parse(run.events) };
    try {
      await this.loop(ctx);
    } catch (err) {
      if (err instanceof LeaseLost) return;
      // An executor bug or a database error: keep the run, retry it later, keep the executor going.
      this.opts.log("error", `driving run ${runId} failed`, err);
      await this.release(ctx.run, "queued", Date.now() + this.opts.backoff(0)).catch(() => undefined);
    } finally {
      this.unblock(fn.id);
    }
  }

  private unblock(fnId: string): void {
    const set = this.blocked.get(fnId);
    if (!set || set.size === 0) return;
    this.blocked.delete(fnId);
    this.wake(set);
  }

  private async loadState(runId: string): Promise<State> {
    // One statement per iteration of the drive loop: the run, its memoized steps in completion order, its pending ops.
    const [row] = await query<{
      status: string;
      attempt: number;
      parallel: number;
      lease_owner: string | null;
      state_bytes: number;
      steps: string;
      pending: string;
    }>(
      `SELECT status, attempt, parallel, lease_owner, state_bytes,
              (SELECT json_group_array(json_array(hashed_id, result))
                 FROM (SELECT hashed_id, result FROM executor_steps WHERE run_id = ?1 ORDER BY seq)) AS steps,
              (SELECT json_group_array(json_object('run_id', run_id, 'hashed_id', hashed_id, 'kind', kind, 'op', op,
                        'attempt', attempt, 'due_at', due_at, 'event_name', event_name, 'expression', expression,
                        'race', race, 'created_at', created_at))
                 FROM executor_pending WHERE run_id = ?1) AS pending
         FROM executor_runs WHERE id = ?1`,
      [runId],
    );
    if (!row || row.lease_owner !== this.workerId) throw new LeaseLost(runId);
    const stepRows = JSON.parse(row.steps) as [string, string][];
    const steps = new Map<string, unknown>();
    for (const [id, result] of stepRows) steps.set(id, JSON.parse(result));
    return {
      status: row.status,
      steps,
      stack: stepRows.map(([id]) => id),
      pending: JSON.parse(row.pending) as PendingRow[],
      attempt: row.attempt,
      parallel: row.parallel === 1,
      stateBytes: Number(row.state_bytes ?? 0),
    };
  }

  private async loop(ctx: Ctx): Promise<void> {
    for (;;) {
      if (!this.running) {
        await this.release(ctx.run, "queued", 0);
        return;
      }
      const state = await this.loadState(ctx.run.id);
      if (state.status !== "running") return;
      const now = Date.now();

      const expired = state.pending.filter((p) => p.kind !== "step" && p.due_at !== null && p.due_at <= now);
      if (expired.length > 0) {
        await this.guarded(ctx, async (t) => {
          for (const p of expired) {
            const result =
              p.kind === "invoke"
                ? { error: { name: "InngestInvokeTimeoutError", message: "Timed out waiting for the invoked function to complete" } }
                : null;
            await resolvePending(t, { runId: ctx.run.id, hashedId: p.hashed_id, result, kind: "resume" });
          }
        });
        continue;
      }

      const runnable = state.pending.filter((p) => p.kind === "step" && (p.due_at ?? 0) <= now);
      if ((runnable.length > 0 || state.pending.length === 0) && this.strict && state.steps.size >= this.limits.maxSteps) {
        // Cloud checks the count before it runs anything more of the run, and fails it at once.
        const message = `The function run exceeded the step limit of ${this.limits.maxSteps} steps.`;
        await this.finish(ctx.run, "failed", null, cloudError("InngestErrFunctionOverflowed", message));
        return;
      }
      if (runnable.length > 0) {
        const done = await Promise.all(runnable.map((p) => this.runStep(ctx, state, p)));
        if (done.includes("stop")) return;
        continue;
      }

      if (state.pending.length > 0) {
        if (await this.park(ctx, state)) return;
        continue;
      }

      const result = await this.discover(ctx, state);
      if (result === "stop") return;
    }
  }

  /**
   * A write that only happens while we still hold the lease and the run is live. It acts on a call's reply, so it
   * also moves the dispatch generation on: checkpoints still arriving from that call are stale from here.
   */
  private async guarded<T>(
    ctx: Ctx,
    fn: (t: GuardedTx) => Promise<T>,
    opts: { resetAttempt?: boolean; parallel?: boolean } = {},
  ): Promise<T> {
    const { value, woken } = await tx(async (t) => {
      const ok = await t.execute({
        sql: `UPDATE executor_runs SET generation = generation + 1, attempt = CASE WHEN ?1 THEN 0 ELSE attempt END,
                parallel = coalesce(?2, parallel)
              WHERE id = ?3 AND lease_owner = ?4 AND status = 'running'`,
        args: [opts.resetAttempt ? 1 : 0, opts.parallel === undefined ? null : opts.parallel ? 1 : 0, ctx.run.id, this.workerId],
      });
      if (ok.rowsAffected === 0) throw new LeaseLost(ctx.run.id);
      const woken: string[] = [];
      const value = await fn(Object.assign(t, { woken }));
      return { value, woken };
    });
    ctx.run.generation += 1;
    if (woken.length > 0) this.wake(woken);
    return value;
  }

  /**
   * The call body. `disableImmediate` is set for targeted calls to parallel steps; a discovery (there is nothing
   * pending by then: the last parallel step is done, or the run resumed) clears it, as Inngest's v2 runs do. Apps whose
   * checkpoint calls reach this executor get `fn_id` and the dispatch token `qi_id`, which makes the SDK checkpoint.
   */
  private body(ctx: Ctx, state: State, attempt: number, disableImmediate: boolean): CallBody {
    const steps: Record<string, unknown> = {};
    for (const [k, v] of state.steps) steps[k] = v;
    return {
      event: ctx.event,
      events: ctx.events,
      steps,
      ctx: {
        run_id: ctx.run.id,
        attempt,
        max_attempts: ctx.fn.retries + 1,
        stack: { stack: state.stack, current: state.stack.length },
        disable_immediate_execution: disableImmediate,
        use_api: false,
        ...(ctx.target.checkpointing ? { fn_id: ctx.fn.id, qi_id: dispatchToken(this.workerId, ctx.run.generation) } : {}),
      },
      version: 2,
    };
  }

  private async call(ctx: Ctx, stepId: string, body: CallBody): Promise<CallOutcome> {
    // Strict mode: a call may last as long as the host lets a function run; past it, the attempt fails as the host's
    // timeout would fail it (and is retried like one).
    const limited = this.strict !== null && this.limits.maxStepDurationMs < this.opts.requestTimeoutMs;
    return callFunction({
      target: ctx.target,
      fnId: ctx.fn.id,
      stepId,
      body,
      timeoutMs: limited ? this.limits.maxStepDurationMs : this.opts.requestTimeoutMs,
      runId: ctx.run.id,
      dispatch: { requestId: ulid(), generation: ctx.run.generation },
      timeoutReason: limited
        ? `over the step duration limit of ${this.limits.maxStepDurationMs / 1000} s (GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS), which a serverless host enforces by ending the call`
        : undefined,
    });
  }

  /** The reply to a dispatch this executor fenced (409 to its checkpoint) is ignored; the run is not failed for it. */
  private isStaleDispatch(outcome: CallOutcome): boolean {
    return outcome.kind === "error" && outcome.error.name === "StaleDispatchError";
  }

  private async discover(ctx: Ctx, state: State): Promise<"continue" | "stop"> {
    const outcome = await this.call(ctx, "step", this.body(ctx, state, state.attempt, false));
    if (this.isStaleDispatch(outcome)) return "continue";
    if (outcome.kind === "complete") {
      await this.finish(ctx.run, "completed", outcome.data, null);
      return "stop";
    }
    if (outcome.kind === "error") return this.functionError(ctx, state, outcome.error, outcome.retriable, outcome.retryAfterMs);
    return this.handleOps(ctx, state, outcome.ops, undefined, outcome.retryAfterMs);
  }

  private async runStep(ctx: Ctx, state: State, p: PendingRow): Promise<"continue" | "stop"> {
    const outcome = await this.call(ctx, p.hashed_id, this.body(ctx, state, p.attempt, true));
    if (this.isStaleDispatch(outcome)) return "continue";
    if (outcome.kind === "ops") return this.handleOps(ctx, state, outcome.ops, p, outcome.retryAfterMs);
    if (outcome.kind === "complete") {
      await this.finish(ctx.run, "completed", outcome.data, null);
      return "stop";
    }
    if (!outcome.retriable) return this.functionError(ctx, state, outcome.error, false);
    // The call itself failed (endpoint down, bad answer): count it against the step.
    await this.guarded(ctx, (t) => this.stepFailedAttempt(t, ctx, p.hashed_id, p.attempt, outcome.error, outcome.retryAfterMs, p));
    return "continue";
  }

  private async stepFailedAttempt(
    t: Tx,
    ctx: Ctx,
    hashedId: string,
    attempt: number,
    error: unknown,
    retryAfterMs: number | undefined,
    existing: PendingRow | undefined,
  ): Promise<void> {
    if (attempt >= ctx.fn.retries) {
      if (existing) await resolvePending(t, { runId: ctx.run.id, hashedId, result: { error }, kind: "step" });
      else await this.record(t, ctx, hashedId, { error });
      return;
    }
    const dueAt = Date.now() + (retryAfterMs ?? this.opts.backoff(attempt));
    await t.execute({
      sql: `INSERT INTO executor_pending (run_id, hashed_id, kind, op, attempt, due_at, created_at) VALUES (?, ?, 'step', ?, ?, ?, ?)
            ON CONFLICT(run_id, hashed_id) DO UPDATE SET attempt = excluded.attempt, due_at = excluded.due_at`,
      args: [ctx.run.id, hashedId, existing?.op ?? "{}", attempt + 1, dueAt, Date.now()],
    });
  }

  private async record(t: Tx, ctx: Ctx, hashedId: string, result: unknown): Promise<boolean> {
    return recordEntry(t, { runId: ctx.run.id, hashedId, result, kind: "step" });
  }

  private async handleOps(
    ctx: Ctx,
    state: State,
    ops: OutgoingOp[],
    target: PendingRow | undefined,
    retryAfterMs: number | undefined,
  ): Promise<"continue" | "stop"> {
    const known = new Set(["StepRun", "StepError", "StepFailed", "StepPlanned", "Sleep", "WaitForEvent", "InvokeFunction", "RunComplete"]);
    const unknown = ops.find((o) => !known.has(o.op));
    if (unknown) {
      return this.functionError(ctx, state, protocolError(`Unsupported op "${unknown.op}" from ${ctx.target.url} (step ${unknown.id})`), true);
    }
    const invalid = ops.map((o) => validateOp(o)).find((m) => m !== null);
    if (invalid) return this.functionError(ctx, state, protocolError(`${invalid} from ${ctx.target.url}`), true);
    const overLimit = this.checkStateLimits(state, ops);
    if (overLimit) return this.functionError(ctx, state, overLimit, false);
    // A checkpointing app finishes with 206 [...buffered StepRuns, RunComplete]: the run is complete.
    const complete = ops.find((o) => o.op === "RunComplete");
    if (complete) {
      await this.finish(ctx.run, "completed", complete.data ?? null, null);
      return "stop";
    }
    const registry = await getRegistry();
    const now = Date.now();
    const progressed = await this.guarded(
      ctx,
      async (t) => {
        let changed = false;
        for (const op of ops) {
          if (state.steps.has(op.id)) {
            // Already recorded (a repeated report): nothing to store, but a pending row for it is obsolete and would
            // otherwise make the run call the app again and again.
            const del = await t.execute({ sql: "DELETE FROM executor_pending WHERE run_id = ? AND hashed_id = ?", args: [ctx.run.id, op.id] });
            if (del.rowsAffected > 0) changed = true;
            continue;
          }
          const isTarget = target?.hashed_id === op.id;
          const race = op.opts?.parallelMode === "race" ? 1 : 0;
          const insertPending = async (
            kind: PendingRow["kind"],
            dueAt: number | null,
            eventName: string | null = null,
            expression: string | null = null,
            key: WaitMatchKey | null = null,
          ) => {
            const r = await t.execute({
              sql: `INSERT INTO executor_pending (run_id, hashed_id, kind, op, attempt, due_at, event_name, expression, match_path, match_value, race, created_at)
                    VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, hashed_id) DO NOTHING`,
              args: [ctx.run.id, op.id, kind, JSON.stringify(op), dueAt, eventName, expression, key?.path ?? null, key?.value ?? null, race, now],
            });
            if (r.rowsAffected > 0) changed = true;
          };
          switch (op.op) {
            case "StepRun":
              if (isTarget) changed = (await resolvePending(t, { runId: ctx.run.id, hashedId: op.id, result: { data: op.data ?? null }, kind: "step" })) || changed;
              else changed = (await this.record(t, ctx, op.id, { data: op.data ?? null })) || changed;
              break;
            case "StepFailed":
              if (isTarget) changed = (await resolvePending(t, { runId: ctx.run.id, hashedId: op.id, result: { error: op.error ?? null }, kind: "step" })) || changed;
              else changed = (await this.record(t, ctx, op.id, { error: op.error ?? null })) || changed;
              break;
            case "StepError": {
              const existing = state.pending.find((p) => p.hashed_id === op.id);
              await this.stepFailedAttempt(t, ctx, op.id, existing?.attempt ?? 0, op.error ?? null, retryAfterMs, existing);
              changed = true;
              break;
            }
            case "StepPlanned":
              await insertPending("step", null);
              break;
            case "Sleep":
              await insertPending("sleep", sleepUntil(op.name, now));
              break;
            case "WaitForEvent": {
              const eventName = op.name ?? "";
              const timeout = op.opts?.timeout;
              const dueAt = timeout === undefined || timeout === null ? FAR_FUTURE : deadline(timeout, now);
              const expression = typeof op.opts?.if === "string" && op.opts.if !== "" ? op.opts.if : null;
              // A wait on `event.<a> == async.<b>` is found by its key when an event comes (events.ts resolveWaits).
              const key = waitMatchKey(expression, ctx.event);
              await insertPending("wait", dueAt, eventName, expression, key);
              // Look back to the moment the run reached this wait (its step history, see recordEntry in events.ts).
              // Inngest Cloud does not (inngest/inngest#1433): in strict mode only events after this moment match.
              if (!this.strict && this.opts.waitLookBack) {
                await resolveWaitFromHistory(t, { runId: ctx.run.id, hashedId: op.id, eventName, expression, key, trigger: ctx.event });
              }
              break;
            }
            case "InvokeFunction": {
              const fnId = String(op.opts?.function_id ?? "");
              const callee = registry.byId.get(fnId);
              const timeout = op.opts?.timeout;
              const dueAt = typeof timeout === "string" && timeout ? deadline(timeout, now) : FAR_FUTURE;
              changed = true;
              if (!callee) {
                await this.record(t, ctx, op.id, { error: { name: "Error", message: `Invoked function "${fnId}" is not registered` } });
                break;
              }
              await insertPending("invoke", dueAt);
              const payload = (op.opts?.payload ?? {}) as { data?: Record<string, unknown>; v?: string };
              const event: StoredEvent = { id: ulid(), name: INVOKE_EVENT, data: payload.data ?? {}, ts: now };
              const childId = ulid();
              const [top] = await rows<{ s: number | null }>(t, "SELECT max(seq) AS s FROM executor_events");
              await createRun(t, { fn: callee, event, runId: childId, now, watermark: Number(top?.s ?? 0), parent: { runId: ctx.run.id, step: op.id } });
              t.woken.push(childId);
              break;
            }
          }
        }
        if (!changed) {
          // Steps checkpointed during the call are progress too, though its reply repeated what was known.
          const [count] = await rows<{ n: number }>(t, "SELECT count(*) AS n FROM executor_steps WHERE run_id = ?", [ctx.run.id]);
          if (Number(count?.n) <= state.steps.size) return false;
        }
        // A call that made progress starts the next discovery fresh (attempt 0).
        await t.execute({ sql: "UPDATE executor_runs SET attempt = 0 WHERE id = ?", args: [ctx.run.id] });
        return true;
      },
      // Several ops mean parallel steps.
      { parallel: ops.length > 1 },
    );
    if (progressed) return "continue";
    // The app reported only ops that already have results: calling it again at once would spin. Back off, and after
    // NO_PROGRESS_LIMIT such calls fail the run with an error that says so.
    const ids = [...new Set(ops.map((o) => `${o.op} ${o.id}`))].join(", ");
    return this.functionError(
      ctx,
      state,
      protocolError(
        `Run made no progress: ${ctx.target.url} reported only ops that already have results (${ids}) in ${NO_PROGRESS_LIMIT + 1} calls; is the function deterministic (same step ids in the same order on every call)?`,
      ),
      true,
      undefined,
      NO_PROGRESS_LIMIT,
    );
  }

  /**
   * Inngest's step output and run state limits, as the checkpoint path enforces them, on results reported in a 206:
   * a step result over the limit, or results that would take the run's state past its limit, fail the run with the
   * error Inngest gives.
   */
  private checkStateLimits(state: State, ops: OutgoingOp[]): SerializedError | null {
    let added = 0;
    for (const op of ops) {
      if (state.steps.has(op.id)) continue;
      if (op.op !== "StepRun" && op.op !== "StepFailed") continue;
      const bytes = Buffer.byteLength(JSON.stringify(op.op === "StepRun" ? { data: op.data ?? null } : { error: op.error ?? null }));
      if (bytes > this.limits.maxStepOutputBytes) {
        return {
          ...cloudError("InngestErrStepOutputTooLarge", "step output size is greater than the limit"),
          step: op.displayName ?? op.name ?? op.id,
          bytes,
          limit: this.limits.maxStepOutputBytes,
        };
      }
      added += bytes;
    }
    if (added > 0 && state.stateBytes + added > this.limits.maxRunStateBytes) {
      return cloudError("InngestErrStateOverflowed", `The function run exceeded the state size limit of ${this.limits.maxRunStateBytes} bytes.`);
    }
    return null;
  }

  private async functionError(
    ctx: Ctx,
    state: State,
    error: SerializedError,
    retriable: boolean,
    retryAfterMs?: number,
    retries: number = ctx.fn.retries,
  ): Promise<"continue" | "stop"> {
    if (retriable) {
      // The attempt is read in the write: checkpoints during the call may have reset it (a fresh budget per step).
      const at = await this.guarded(ctx, async (t) => {
        const [row] = await rows<{ attempt: number }>(t, "SELECT attempt FROM executor_runs WHERE id = ?", [ctx.run.id]);
        const attempt = Number(row?.attempt ?? state.attempt);
        if (attempt >= retries) return null;
        const at = Date.now() + (retryAfterMs ?? this.opts.backoff(attempt));
        await t.execute({
          sql: "UPDATE executor_runs SET attempt = attempt + 1, error = ?, status = 'queued', next_at = ?, lease_owner = NULL, lease_until = 0 WHERE id = ?",
          args: [JSON.stringify(error), at, ctx.run.id],
        });
        return at;
      });
      if (at !== null) {
        this.wakeAt(ctx.run.id, at);
        this.unblock(ctx.fn.id);
        return "stop";
      }
    }
    await this.finish(ctx.run, "failed", null, error);
    return "stop";
  }

  private async park(ctx: Ctx, state: State): Promise<boolean> {
    const parked = await tx(async (t) => {
      const count = await rows<{ n: number }>(t, "SELECT count(*) AS n FROM executor_steps WHERE run_id = ?", [ctx.run.id]);
      if (Number(count[0]?.n) !== state.steps.size) return null;
      const pending = await rows<PendingRow>(t, "SELECT * FROM executor_pending WHERE run_id = ?", [ctx.run.id]);
      if (pending.length === 0) return null;
      const nextAt = Math.min(...pending.map((p) => p.due_at ?? (p.kind === "step" ? 0 : FAR_FUTURE)));
      const status = pending.some((p) => p.kind === "wait" || p.kind === "invoke")
        ? "waiting"
        : pending.some((p) => p.kind === "sleep")
          ? "sleeping"
          : "queued";
      const r = await t.execute({
        sql: "UPDATE executor_runs SET status = ?, next_at = ?, lease_owner = NULL, lease_until = 0 WHERE id = ? AND lease_owner = ? AND status = 'running'",
        args: [status, nextAt, ctx.run.id, this.workerId],
      });
      if (r.rowsAffected === 0) throw new LeaseLost(ctx.run.id);
      return nextAt;
    });
    if (parked === null) return false;
    this.wakeAt(ctx.run.id, parked);
    this.unblock(ctx.fn.id);
    return true;
  }

  private async release(run: RunRow, status: string, nextAt: number): Promise<void> {
    await tx((t) =>
      t.execute({
        sql: "UPDATE executor_runs SET status = ?, next_at = ?, lease_owner = NULL, lease_until = 0 WHERE id = ? AND lease_owner = ? AND status = 'running'",
        args: [status, nextAt, run.id, this.workerId],
      }),
    );
    this.wakeAt(run.id, nextAt);
  }

  /** Complete or fail a run; tell an invoking parent, and announce failures for onFailure handlers. */
  private async finish(run: RunRow, status: "completed" | "failed", output: unknown, error: SerializedError | null): Promise<void> {
    const registry = await getRegistry();
    const now = Date.now();
    const woken = await tx(async (t) => {
      const r = await t.execute({
        sql: `UPDATE executor_runs SET status = ?, output = ?, error = ?, ended_at = ?, lease_owner = NULL, lease_until = 0
              WHERE id = ? AND lease_owner = ? AND status NOT IN ${TERMINAL_SQL}`,
        args: [status, status === "completed" ? JSON.stringify(output ?? null) : null, error ? JSON.stringify(error) : null, now, run.id, this.workerId],
      });
      if (r.rowsAffected === 0) throw new LeaseLost(run.id);
      await t.execute({ sql: "DELETE FROM executor_pending WHERE run_id = ?", args: [run.id] });
      const woken: string[] = [];
      if (run.parent_run_id && run.parent_step) {
        const result = status === "completed" ? { data: output ?? null } : { error: error ?? toSerializedError(null) };
        if (await resolvePending(t, { runId: run.parent_run_id, hashedId: run.parent_step, result })) woken.push(run.parent_run_id);
      }
      const fn = registry.byId.get(run.fn_id);
      const trigger = JSON.parse(run.event) as StoredEvent;
      // function.finished, for functions and waits that listen (a run started by a system function event announces
      // nothing, so a listener cannot trigger itself forever).
      if (!trigger.name.startsWith("inngest/function.") && (await hasListeners(t, registry, FINISHED_EVENT))) {
        const data = { function_id: run.fn_id, run_id: run.id, event: trigger, ...(status === "completed" ? { result: output ?? null } : { error }) };
        woken.push(...(await ingestInTx(t, [{ name: FINISHED_EVENT, data }], registry, now)).woken);
      }
      const isFailureHandler = fn?.config.triggers.some((tr) => tr.event === FAILURE_EVENT);
      if (status === "failed" && !isFailureHandler) {
        const res = await ingestInTx(
          t,
          [{ name: FAILURE_EVENT, data: { function_id: run.fn_id, run_id: run.id, error, event: JSON.parse(run.event) } }],
          registry,
          now,
        );
        woken.push(...res.woken);
      }
      return woken;
    });
    if (woken.length > 0) this.wake(woken);
    this.opts.onRunFinished({ id: run.id, fnId: run.fn_id, status });
  }

  /** Cancel a run by id (API use; cancelOn events cancel through ingestion). */
  async cancel(runId: string): Promise<void> {
    const registry = await getRegistry();
    this.wake(await tx((t) => cancelRunInTx(t, runId, Date.now(), registry)));
  }
}

/** Ops whose timing fields cannot be read are a protocol error, reported before anything is stored. */
function validateOp(op: OutgoingOp): string | null {
  try {
    if (op.op === "Sleep") sleepUntil(op.name, 0);
    if (op.op === "WaitForEvent") {
      if (!op.name) return `WaitForEvent op ${op.id} without an event name`;
      if (op.opts?.timeout != null) deadline(op.opts.timeout, 0);
    }
    if (op.op === "InvokeFunction" && typeof op.opts?.function_id !== "string") return `InvokeFunction op ${op.id} without opts.function_id`;
    if (op.op === "InvokeFunction" && typeof op.opts?.timeout === "string" && op.opts.timeout) deadline(op.opts.timeout, 0);
  } catch (err) {
    return `Malformed ${op.op} op ${op.id}: ${err instanceof Error ? err.message : String(err)}`;
  }
  return null;
}
