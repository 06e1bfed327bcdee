import { Cron } from "croner";
import { celKey, celMatches, checkExpression } from "./cel";
import { parseDuration, type FunctionConfig } from "./protocol";
import { query, TERMINAL_SQL, type Tx } from "./store";

/**
 * The functions every synced app registered, read from executor_apps so that any process on the database (the web
 * server ingesting events, a separate worker) sees the same set.
 */

export const DEFAULT_RETRIES = 4;
export const FAILURE_EVENT = "inngest/function.failed";
export const INVOKE_EVENT = "inngest/function.invoked";
export const FINISHED_EVENT = "inngest/function.finished";
export const CANCELLED_EVENT = "inngest/function.cancelled";
export const CRON_EVENT = "inngest/scheduled.timer";

/**
 * One concurrency constraint. `scope` "fn" limits the runs of this function (per key value); "env" and "account" both
 * mean, on this single embedded executor, "every run of any function whose constraint's key evaluates to the same
 * value" (Inngest requires a key for them too).
 */
export type ConcurrencyConstraint = { limit: number; key?: string; scope: "fn" | "env" | "account" };

/** Flow control, read from the function config at sync (checkFunctionConfig refuses what is not listed here). */
export type FlowControl = {
  rateLimit?: { limit: number; periodMs: number; key?: string };
  throttle?: { limit: number; periodMs: number; burst: number; key?: string };
  debounce?: { periodMs: number; timeoutMs?: number; key?: string };
  batch?: { maxSize: number; timeoutMs: number; key?: string };
  priority?: { run: string };
  singleton?: { mode: "skip" | "cancel"; key?: string };
  timeouts?: { startMs?: number; finishMs?: number };
  crons: { expression: string; pattern: string; timezone?: string }[];
};

export type RegisteredFunction = {
  id: string;
  appUrl: string;
  config: FunctionConfig;
  retries: number;
  /** The first two constraints of a concurrency option (Inngest allows at most two). */
  concurrency: ConcurrencyConstraint[];
  flow: FlowControl;
};

export type Registry = {
  byId: Map<string, RegisteredFunction>;
  byEvent: Map<string, RegisteredFunction[]>;
  cancelsByEvent: Map<string, RegisteredFunction[]>;
};

let cached: { at: number; registry: Registry } | undefined;
const TTL_MS = 1000;

export function invalidateRegistry(): void {
  cached = undefined;
}

export async function getRegistry(): Promise<Registry> {
  if (cached && Date.now() - cached.at < TTL_MS) return cached.registry;
  const apps = await query<{ url: string; functions: string }>("SELECT url, functions FROM executor_apps");
  const registry = buildRegistry(apps.map((a) => ({ url: a.url, functions: JSON.parse(a.functions) as FunctionConfig[] })));
  cached = { at: Date.now(), registry };
  return registry;
}

export function buildRegistry(apps: { url: string; functions: FunctionConfig[] }[]): Registry {
  const registry: Registry = { byId: new Map(), byEvent: new Map(), cancelsByEvent: new Map() };
  for (const app of apps) {
    for (const config of app.functions) {
      const step = Object.values(config.steps)[0];
      // A config stored before sync checked options (checkFunctionConfig) may not read: such a function is left out,
      // as its next sync will refuse it, rather than breaking the registry for every other function.
      let flow: FlowControl;
      try {
        flow = readFlow(config);
      } catch {
        continue;
      }
      const fn: RegisteredFunction = {
        id: config.id,
        appUrl: app.url,
        config,
        retries: step?.retries?.attempts ?? DEFAULT_RETRIES,
        concurrency: readConcurrency(config),
        flow,
      };
      registry.byId.set(fn.id, fn);
      for (const trigger of config.triggers) {
        if (!trigger.event) continue;
        const list = registry.byEvent.get(trigger.event) ?? [];
        list.push(fn);
        registry.byEvent.set(trigger.event, list);
      }
      for (const cancel of config.cancel ?? []) {
        const list = registry.cancelsByEvent.get(cancel.event) ?? [];
        list.push(fn);
        registry.cancelsByEvent.set(cancel.event, list);
      }
    }
  }
  return registry;
}

export type StoredEvent = { id: string; name: string; data: Record<string, unknown>; ts: number; v?: string; user?: unknown };

/**
 * Create a run of `fn` for `event` inside a write transaction, applying the function's flow control. Returns the id of
 * the run the event went to (a new run, or the open debounce/batch run it joined), or null when the event starts no
 * run: the idempotency key already started one in the last 24 h, the rate limit dropped it, or a singleton skipped it.
 * Invoked runs (`parent`) bypass rateLimit, throttle, debounce, batchEvents and singleton, so the invoking step always
 * gets an answer; concurrency, priority and timeouts apply to them.
 */
export async function createRun(
  t: Tx,
  {
    fn,
    event,
    runId,
    now,
    watermark,
    parent,
    cancelled,
  }: {
    fn: RegisteredFunction;
    event: StoredEvent;
    runId: string;
    now: number;
    watermark: number;
    parent?: { runId: string; step: string };
    /** Runs this one cancelled (singleton mode cancel), for the caller to announce. */
    cancelled?: string[];
  },
): Promise<string | null> {
  let idempotencyKey: string | null = null;
  if (fn.config.idempotency) {
    idempotencyKey = celKey(fn.config.idempotency, { event }) ?? null;
    if (idempotencyKey !== null) {
      const existing = await t.execute({
        sql: "SELECT 1 FROM executor_runs WHERE fn_id = ? AND idempotency_key = ? AND created_at > ? LIMIT 1",
        args: [fn.id, idempotencyKey, now - 86_400_000],
      });
      if (existing.rows.length > 0) return null;
    }
  }
  const flow = fn.flow;
  const key = (expression: string | undefined) => (expression ? (celKey(expression, { event }) ?? "") : "");
  let nextAt = 0;
  let gatherKey: string | null = null;
  let singletonKey: string | null = null;
  if (!parent) {
    if (flow.rateLimit) {
      // GCRA with a burst of `limit`: at most `limit` runs start in any `period`; an event over it starts nothing.
      const { limit, periodMs } = flow.rateLimit;
      const start = await gcra(t, { fnId: fn.id, kind: "rate", key: key(flow.rateLimit.key), now, periodMs, limit, capacity: limit, admitOnlyNow: true });
      if (start === null) return null;
    }
    if (flow.debounce || flow.batch) {
      gatherKey = key(flow.debounce?.key ?? flow.batch?.key);
      // The open run for this key: not leased yet and not yet due (a due one is on its way to start).
      const [open] = (
        await t.execute({
          sql: `SELECT id, created_at, events FROM executor_runs WHERE fn_id = ? AND gather_key = ? AND status = 'queued'
                  AND generation = 0 AND next_at > ? LIMIT 1`,
          args: [fn.id, gatherKey, now],
        })
      ).rows as unknown as { id: string; created_at: number; events: string }[];
      if (open && flow.debounce) {
        // Debounce: the run will get the LAST event, once no event came for `period` (at most `timeout` after the first).
        const due = debounceDue(flow.debounce, Number(open.created_at), now);
        await t.execute({
          sql: "UPDATE executor_runs SET event = ?, events = ?, watermark = ?, next_at = ? WHERE id = ?",
          args: [JSON.stringify(event), JSON.stringify([event]), watermark, due, open.id],
        });
        return open.id;
      }
      if (open && flow.batch) {
        // Batch: the run gets every event, in order; a full batch starts at once and takes no more.
        const events = [...(JSON.parse(open.events) as unknown[]), event];
        const full = events.length >= flow.batch.maxSize;
        await t.execute({
          sql: "UPDATE executor_runs SET events = ?, watermark = ?, next_at = CASE WHEN ? THEN 0 ELSE next_at END, gather_key = CASE WHEN ? THEN NULL ELSE gather_key END WHERE id = ?",
          args: [JSON.stringify(events), watermark, full ? 1 : 0, full ? 1 : 0, open.id],
        });
        return open.id;
      }
      if (flow.debounce) nextAt = debounceDue(flow.debounce, now, now);
      else if (flow.batch && flow.batch.maxSize > 1) nextAt = now + flow.batch.timeoutMs;
      else gatherKey = null;
    }
    if (flow.singleton) {
      singletonKey = key(flow.singleton.key);
      const live = (
        await t.execute({
          sql: `SELECT id FROM executor_runs WHERE fn_id = ? AND singleton_key = ? AND status NOT IN ${TERMINAL_SQL}`,
          args: [fn.id, singletonKey],
        })
      ).rows as unknown as { id: string }[];
      if (live.length > 0) {
        if (flow.singleton.mode === "skip") return null;
        // mode cancel: the new run replaces the running one.
        for (const { id } of live) {
          await t.execute({
            sql: `UPDATE executor_runs SET status = 'cancelled', ended_at = ?, lease_owner = NULL, lease_until = 0
                  WHERE id = ? AND status NOT IN ${TERMINAL_SQL}`,
            args: [now, id],
          });
          await t.execute({ sql: "DELETE FROM executor_pending WHERE run_id = ?", args: [id] });
          cancelled?.push(id);
        }
      }
    }
    if (flow.throttle) {
      // GCRA: `limit + burst` runs start at once, then one every period / limit; the rest wait in order (FIFO).
      const { limit, periodMs, burst } = flow.throttle;
      const start = await gcra(t, { fnId: fn.id, kind: "throttle", key: key(flow.throttle.key), now, periodMs, limit, capacity: limit + burst, admitOnlyNow: false });
      nextAt = Math.max(nextAt, start ?? now);
    }
  }
  const [ck1, ck2] = fn.concurrency.map((c) => concurrencyKey(fn.id, c, event));
  const priority = flow.priority ? priorityMs(flow.priority.run, event) : 0;
  const timeoutAt = flow.timeouts?.startMs !== undefined ? now + flow.timeouts.startMs : null;
  await t.execute({
    sql: `INSERT INTO executor_runs (id, fn_id, app_url, event, events, status, next_at, watermark, concurrency_key,
            concurrency_key2, gather_key, priority, singleton_key, timeout_at, idempotency_key, parent_run_id, parent_step, created_at)
          VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    args: [
      runId,
      fn.id,
      fn.appUrl,
      JSON.stringify(event),
      JSON.stringify([event]),
      nextAt > now ? nextAt : 0,
      watermark,
      ck1 ?? null,
      ck2 ?? null,
      gatherKey,
      priority,
      singletonKey,
      timeoutAt,
      idempotencyKey,
      parent?.runId ?? null,
      parent?.step ?? null,
      now,
    ],
  });
  return runId;
}

function debounceDue(debounce: NonNullable<FlowControl["debounce"]>, firstAt: number, now: number): number {
  const quiet = now + debounce.periodMs;
  return debounce.timeoutMs === undefined ? quiet : Math.min(quiet, firstAt + debounce.timeoutMs);
}

/**
 * The generic cell rate algorithm Inngest uses for rateLimit and throttle, with its theoretical arrival time stored in
 * executor_flow (durable, and read-modify-written inside the caller's write transaction). Returns when the run may
 * start, or null when `admitOnlyNow` and it may not start now (then nothing is written).
 */
async function gcra(
  t: Tx,
  { fnId, kind, key, now, periodMs, limit, capacity, admitOnlyNow }: {
    fnId: string;
    kind: string;
    key: string;
    now: number;
    periodMs: number;
    limit: number;
    capacity: number;
    admitOnlyNow: boolean;
  },
): Promise<number | null> {
  const interval = periodMs / limit;
  const tolerance = (capacity - 1) * interval;
  const [row] = (await t.execute({ sql: "SELECT at FROM executor_flow WHERE fn_id = ? AND kind = ? AND key = ?", args: [fnId, kind, key] }))
    .rows as unknown as { at: number }[];
  const tat = row ? Number(row.at) : now;
  const start = Math.max(now, tat - tolerance);
  if (admitOnlyNow && start > now) return null;
  await t.execute({
    sql: "INSERT INTO executor_flow (fn_id, kind, key, at) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET at = excluded.at",
    args: [fnId, kind, key, Math.round(Math.max(tat, start) + interval)],
  });
  return start;
}

/** A scope-qualified concurrency key: runs with equal keys share the constraint's limit. */
function concurrencyKey(fnId: string, c: ConcurrencyConstraint, event: StoredEvent): string {
  const value = c.key ? (celKey(c.key, { event }) ?? "") : "";
  return c.scope === "fn" ? `fn:${fnId}:${value}` : `shared:${value}`;
}

/** `priority.run` gives seconds (Inngest clamps them to ±600); a failing expression gives 0. */
function priorityMs(expression: string, event: StoredEvent): number {
  const raw = celKey(expression, { event });
  const seconds = raw === undefined ? 0 : Number(JSON.parse(raw));
  if (!Number.isFinite(seconds)) return 0;
  return Math.round(Math.max(-600, Math.min(600, seconds)) * 1000);
}

export function triggerMatches(fn: RegisteredFunction, event: StoredEvent): boolean {
  return fn.config.triggers.some(
    (tr) => tr.event === event.name && (!tr.expression || celMatches(tr.expression, { event })),
  );
}

/** Options of a function config this executor understands; anything else set is refused at sync. */
const KNOWN_OPTIONS = new Set([
  "id",
  "name",
  "triggers",
  "steps",
  "idempotency",
  "concurrency",
  "cancel",
  "rateLimit",
  "throttle",
  "debounce",
  "batchEvents",
  "priority",
  "singleton",
  "timeouts",
]);

/** A function option the embedded executor cannot honour: refused at sync, never silently ignored. */
export class UnsupportedOptionError extends Error {
  constructor(fnId: string, option: string, why: string) {
    super(`Function "${fnId}": option ${option} ${why}`);
    this.name = "UnsupportedOptionError";
  }
}

type Loose = Record<string, unknown>;

function readConcurrency(config: FunctionConfig): ConcurrencyConstraint[] {
  const raw = config.concurrency;
  const list = Array.isArray(raw) ? raw : typeof raw === "number" ? [{ limit: raw }] : raw ? [raw] : [];
  return list
    .filter((c) => c.limit > 0)
    .map((c) => ({ limit: c.limit, key: c.key || undefined, scope: (c.scope ?? "fn") as ConcurrencyConstraint["scope"] }));
}

function optionalDuration(value: unknown): number | undefined {
  return value === undefined || value === null || value === "" ? undefined : parseDuration(value);
}

/** A cron trigger: Inngest's `TZ=Area/City <pattern>` prefix selects the timezone (UTC otherwise). */
export function parseCron(expression: string): { pattern: string; timezone?: string } {
  const m = /^\s*(?:CRON_)?TZ=(\S+)\s+(.+)$/.exec(expression);
  return m ? { pattern: m[2]!.trim(), timezone: m[1] } : { pattern: expression.trim() };
}

/** The first due time of `cron` strictly after `after` (epoch ms), or null when it never fires again. */
export function nextCronTime(cron: { pattern: string; timezone?: string }, after: number): number | null {
  const next = new Cron(cron.pattern, { timezone: cron.timezone, paused: true }).nextRun(new Date(after));
  return next ? next.getTime() : null;
}

function readFlow(config: FunctionConfig): FlowControl {
  const c = config as Loose;
  const rate = c.rateLimit as Loose | undefined;
  const throttle = c.throttle as Loose | undefined;
  const debounce = c.debounce as Loose | undefined;
  const batch = c.batchEvents as Loose | undefined;
  const priority = c.priority as Loose | undefined;
  const singleton = c.singleton as Loose | undefined;
  const timeouts = c.timeouts as Loose | undefined;
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  return {
    rateLimit: rate ? { limit: Number(rate.limit), periodMs: parseDuration(rate.period), key: str(rate.key) } : undefined,
    throttle: throttle
      ? { limit: Number(throttle.limit), periodMs: parseDuration(throttle.period), burst: Number(throttle.burst ?? 0), key: str(throttle.key) }
      : undefined,
    debounce: debounce ? { periodMs: parseDuration(debounce.period), timeoutMs: optionalDuration(debounce.timeout), key: str(debounce.key) } : undefined,
    batch: batch ? { maxSize: Number(batch.maxSize), timeoutMs: parseDuration(batch.timeout), key: str(batch.key) } : undefined,
    priority: priority && str(priority.run) ? { run: priority.run as string } : undefined,
    singleton: singleton ? { mode: singleton.mode as "skip" | "cancel", key: str(singleton.key) } : undefined,
    timeouts: timeouts ? { startMs: optionalDuration(timeouts.start), finishMs: optionalDuration(timeouts.finish) } : undefined,
    crons: config.triggers.filter((tr) => tr.cron).map((tr) => ({ expression: tr.cron!, ...parseCron(tr.cron!) })),
  };
}

/**
 * Check a synced function's options before it is registered: each one is either honoured with Inngest's semantics or
 * refused here with the function and option named (UnsupportedOptionError), so nothing is silently ignored.
 */
export function checkFunctionConfig(config: FunctionConfig): void {
  const c = config as Loose;
  const refuse = (option: string, why: string): never => {
    throw new UnsupportedOptionError(config.id, option, why);
  };
  for (const [name, value] of Object.entries(c)) {
    if (value === undefined || value === null || KNOWN_OPTIONS.has(name)) continue;
    refuse(name, "is not supported by the embedded executor");
  }
  const expr = (option: string, value: unknown) => {
    if (value === undefined || value === null || value === "") return;
    if (typeof value !== "string") refuse(option, "must be a CEL expression string");
    try {
      checkExpression(value as string);
    } catch (err) {
      refuse(option, `is not a valid expression: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const duration = (option: string, value: unknown, required: boolean) => {
    if (!required && (value === undefined || value === null || value === "")) return;
    try {
      if (parseDuration(value) <= 0) refuse(option, "must be a positive duration");
    } catch {
      refuse(option, `is not a duration (${JSON.stringify(value)})`);
    }
  };
  const positive = (option: string, value: unknown) => {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1) refuse(option, `must be a positive integer (${JSON.stringify(value)})`);
  };
  expr("idempotency", c.idempotency);

  const concurrency = Array.isArray(c.concurrency) ? (c.concurrency as Loose[]) : c.concurrency && typeof c.concurrency === "object" ? [c.concurrency as Loose] : [];
  if (concurrency.length > 2) refuse("concurrency", "has more than two constraints (Inngest allows at most two)");
  concurrency.forEach((entry, i) => {
    const scope = entry.scope ?? "fn";
    if (!["fn", "env", "account"].includes(String(scope))) refuse(`concurrency[${i}].scope`, `must be fn, env or account (got ${JSON.stringify(scope)})`);
    if (scope !== "fn" && !entry.key) refuse(`concurrency[${i}].scope`, `"${String(scope)}" needs a key`);
    expr(`concurrency[${i}].key`, entry.key);
  });

  const rate = c.rateLimit as Loose | undefined;
  if (rate) {
    positive("rateLimit.limit", rate.limit);
    duration("rateLimit.period", rate.period, true);
    expr("rateLimit.key", rate.key);
  }
  const throttle = c.throttle as Loose | undefined;
  if (throttle) {
    positive("throttle.limit", throttle.limit);
    duration("throttle.period", throttle.period, true);
    if (throttle.burst != null && (typeof throttle.burst !== "number" || throttle.burst < 0)) refuse("throttle.burst", "must be a number ≥ 0");
    expr("throttle.key", throttle.key);
  }
  const debounce = c.debounce as Loose | undefined;
  if (debounce) {
    duration("debounce.period", debounce.period, true);
    duration("debounce.timeout", debounce.timeout, false);
    expr("debounce.key", debounce.key);
  }
  const batch = c.batchEvents as Loose | undefined;
  if (batch) {
    if (debounce) refuse("batchEvents", "cannot be combined with debounce");
    positive("batchEvents.maxSize", batch.maxSize);
    duration("batchEvents.timeout", batch.timeout, true);
    expr("batchEvents.key", batch.key);
    if (batch.if != null && batch.if !== "") refuse("batchEvents.if", "is not supported by the embedded executor");
  }
  const priority = c.priority as Loose | undefined;
  if (priority) expr("priority.run", priority.run);
  const singleton = c.singleton as Loose | undefined;
  if (singleton) {
    if (singleton.mode !== "skip" && singleton.mode !== "cancel") refuse("singleton.mode", `must be "skip" or "cancel" (got ${JSON.stringify(singleton.mode)})`);
    expr("singleton.key", singleton.key);
  }
  const timeouts = c.timeouts as Loose | undefined;
  if (timeouts) {
    duration("timeouts.start", timeouts.start, false);
    duration("timeouts.finish", timeouts.finish, false);
  }
  for (const cancel of config.cancel ?? []) {
    expr("cancelOn.if", cancel.if);
    duration("cancelOn.timeout", cancel.timeout, false);
  }
  for (const trigger of config.triggers) {
    expr("triggers.expression", trigger.expression);
    if (!trigger.cron) continue;
    try {
      if (nextCronTime(parseCron(trigger.cron), Date.now()) === null) refuse(`cron trigger "${trigger.cron}"`, "never fires");
    } catch (err) {
      if (err instanceof UnsupportedOptionError) throw err;
      refuse(`cron trigger "${trigger.cron}"`, `is not a valid cron expression: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
