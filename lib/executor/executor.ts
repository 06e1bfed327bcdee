import { randomUUID } from "node:crypto";
import { getEnv } from "@/lib/env";
import { MAX_RUN_STATE_BYTES, MAX_STEP_OUTPUT_BYTES } from "./checkpoint";
import { cancelRunInTx } from "./events";
import { driveRun, syncOne } from "./dispatch";
import type { AppTarget } from "./protocol";
import { getRegistry, type RegisteredFunction, type Registry } from "./registry";
import { localExecutors, pollDue, renewLeases, schedulePoll, takeInTx, wake } from "./scheduling";
import { onForeignCommit, query, tx, type LeasedRun, type Tx } from "./store";
import { release } from "./waits";

export { ACQUIRE_SQL, DUE_SQL, localHandoff, wakeLocal } from "./scheduling";
export { cloudError, NO_PROGRESS_LIMIT } from "./waits";

/**
 * The embedded executor: drives the functions of any Inngest app (serve URL, or in-process handler) through the
 * SDK's request/206 protocol, with all run state in the database. A worker drives a run only while it holds the
 * run's lease, so several executor processes can share one database.
 *
 * The class holds the state and the public API; the work is in three modules along the seams: scheduling.ts
 * (poll, wake, leases, hand-off, crons, timeouts), dispatch.ts (app sync, driving a run, calls and their outcomes) and
 * waits.ts (ops: steps, sleeps, waits for events, invokes; park, release, retry, finish).
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
  /**
   * Watch the database file for commits made by other processes (lib/db onForeignCommit) and drive the runs they made
   * due at once instead of at the next poll. Default false: an executor in the process that also takes the events
   * (the web server's embedded worker) is handed its runs directly, and the watch would look for due runs after each of
   * that process's own commits. The standalone worker turns it on: a web server without an executor of its own
   * (GATEHOUSE_EMBEDDED_WORKER=false) stores the decisions it drives.
   */
  watchCommits?: boolean;
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

export type ExecutorStatus = {
  workerId: string;
  running: boolean;
  inFlight: number;
  apps: { url: string; appId: string | null; functions: number; syncedAt: number | null; error: string | null }[];
};

/** The event size limit in effect for events ingested in this process: strict mode's, if any executor here is strict. */
export function strictEventLimit(): number | null {
  for (const executor of localExecutors) if (executor.strict) return executor.limits.maxEventBytes;
  return getEnv().GATEHOUSE_EXECUTOR_STRICT ? cloudLimits().maxEventBytes : null;
}

export function defaultBackoff(attempt: number): number {
  const base = Math.min(3_600_000, 1000 * 2 ** attempt);
  return Math.round(base * (0.75 + Math.random() * 0.5));
}

export class Executor {
  readonly workerId: string;
  readonly strict: "cloud" | null;
  readonly limits: CloudLimits;
  // The state below is the executor's own: read and written only by scheduling.ts, dispatch.ts and waits.ts (module
  // functions that take the executor), not by its users.
  /** @internal */
  readonly opts: Required<Omit<ExecutorOptions, "apps" | "workerId" | "strict" | "limits">>;
  /** @internal */
  readonly targets = new Map<string, AppTarget>();
  /** @internal */
  readonly ready = new Set<string>();
  /** @internal */
  readonly driving = new Set<string>();
  /** @internal */
  readonly rewake = new Set<string>();
  /** @internal Runs being driven here: called when wake() names one (a wait of it resolved elsewhere, a cancel). */
  readonly signals = new Map<string, () => void>();
  /** @internal Runs whose lease this executor took in an ingest's transaction (localHandoff), to drive without acquire(). */
  readonly handedOff = new Map<string, { run: LeasedRun; fn: RegisteredFunction }>();
  /** @internal */
  readonly blocked = new Map<string, Set<string>>();
  /** @internal */
  readonly timers = new Set<NodeJS.Timeout>();
  /** @internal Apps whose last sync failed: when to try again (exponential backoff) and the error already logged. */
  readonly syncFailures = new Map<string, { failures: number; nextAt: number; logged: string }>();
  /** @internal */
  pollTimer?: NodeJS.Timeout;
  /** @internal */
  leaseTimer?: NodeJS.Timeout;
  /** @internal */
  running = false;
  /** @internal */
  polling = false;
  /** @internal */
  lastPrune = 0;
  /** @internal A look for runs made due by another process's commit is running (scheduling.ts pollDue)/is asked again. */
  duePolling = false;
  /** @internal */
  dueAgain = false;
  /** @internal Stops watching for other processes' commits. */
  unwatch: (() => void) | null = null;
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
      watchCommits: options.watchCommits ?? false,
    };
    for (const app of options.apps) this.addApp(app);
  }

  /** Sync every app, then start driving runs. Sync failures are stored and retried; they do not stop the start. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    localExecutors.add(this);
    await this.syncAll();
    // Events stored by another process on this database (a web server without an executor of its own, another
    // worker) wake the runs they resume at once, not at the next poll.
    const unwatch = this.opts.watchCommits ? await onForeignCommit(() => pollDue(this)) : null;
    if (this.running) this.unwatch = unwatch;
    else unwatch?.();
    this.leaseTimer = setInterval(() => void renewLeases(this), Math.max(50, Math.floor(this.opts.leaseMs / 3)));
    schedulePoll(this, 0);
  }

  async stop(): Promise<void> {
    this.running = false;
    localExecutors.delete(this);
    this.unwatch?.();
    this.unwatch = null;
    clearTimeout(this.pollTimer);
    clearInterval(this.leaseTimer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.ready.clear();
    // Leases taken in an ingest but not driven yet go back at once (else another process waits for them to expire).
    const handed = [...this.handedOff.values()];
    this.handedOff.clear();
    await Promise.all(handed.map(({ run }) => release(this, run, "queued", 0).catch(() => undefined)));
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

  /** Sync one app (dispatch.ts syncOne); a failure is stored, logged once, and retried with backoff by the poll. */
  syncOne(target: AppTarget): Promise<boolean> {
    return syncOne(this, target);
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
    wake(this, runIds);
  }

  /** localHandoff's take: lease, inside the ingest's transaction `t`, the runs it made runnable (scheduling.ts takeInTx). */
  takeInTx(t: Tx, runIds: string[], registry: Registry, now: number, fns?: Map<string, string>): Promise<string[]> {
    return takeInTx(this, t, runIds, registry, now, fns);
  }

  /** The ingest that took these runs did not commit: no lease of theirs was written. */
  dropTaken(runIds: string[]): void {
    for (const id of runIds) this.handedOff.delete(id);
  }

  /** @internal Drive one run (scheduling.ts pump calls it; the work is dispatch.ts driveRun). */
  drive(runId: string): Promise<void> {
    return driveRun(this, runId);
  }

  /** Cancel a run by id (API use; cancelOn events cancel through ingestion). */
  async cancel(runId: string): Promise<void> {
    const registry = await getRegistry();
    this.wake(await tx((t) => cancelRunInTx(t, runId, Date.now(), registry)));
  }
}
