import { newUlid as ulid } from "@/lib/ids";
import { dispatchToken } from "./checkpoint";
import { resolvePending } from "./events";
import { callFunction, protocolError, syncApp, type AppTarget, type CallBody, type CallOutcome } from "./protocol";
import { checkFunctionConfig, getRegistry, invalidateRegistry, UnsupportedOptionError, type RegisteredFunction, type StoredEvent } from "./registry";
import { ACQUIRE_SQL, acquireArgs, guarded, LeaseLost, unblock, wakeAt, type Ctx, type State } from "./scheduling";
import { query, rows, tx, type LeasedRun, type PendingRow, type RunRow } from "./store";
import { cloudError, finish, functionError, handleOps, park, release, stepFailedAttempt } from "./waits";
import type { Executor } from "./executor";

/**
 * Dispatch to apps: syncing an app target, then driving one run — lease it, load its state, call its app (discovery,
 * or a planned step) with the SDK's request body, and act on the outcome until the run waits, sleeps or ends. What a
 * reply's ops store, and how a run parks, fails or finishes, is waits.ts's.
 */

export async function syncOne(ex: Executor, target: AppTarget): Promise<boolean> {
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
    if (ex.syncFailures.delete(target.url)) ex.opts.log("info", `sync of ${target.url} succeeded again`);
    return true;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // Retried with backoff (1 s doubling to 5 min); the same error is logged once, not on every retry.
    const previous = ex.syncFailures.get(target.url);
    const failures = (previous?.failures ?? 0) + 1;
    const retryIn = Math.min(300_000, 1000 * 2 ** (failures - 1));
    ex.syncFailures.set(target.url, { failures, nextAt: Date.now() + retryIn, logged: message });
    if (previous?.logged !== message) ex.opts.log("warn", `sync of ${target.url} failed (retrying with backoff): ${message}`);
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

async function acquire(ex: Executor, runId: string): Promise<{ run: LeasedRun; fn: RegisteredFunction } | null> {
  const registry = await getRegistry();
  const now = Date.now();
  // Only what deciding needs: what the drive reads of the run (its event and events JSON among them) comes back from
  // the UPDATE.
  const candidate = await query<Pick<RunRow, "fn_id" | "status" | "next_at">>("SELECT fn_id, status, next_at FROM executor_runs WHERE id = ?", [runId]);
  const row = candidate[0];
  if (!row) return null;
  const fn = registry.byId.get(row.fn_id);
  const limited = (fn?.concurrency[0]?.limit ?? null) !== null || (fn?.concurrency[1]?.limit ?? null) !== null;
  const prioritized = fn?.flow.priority !== undefined;
  const acquired = await tx((t) => rows<LeasedRun>(t, ACQUIRE_SQL, acquireArgs(ex, fn, runId, now)));
  const run = acquired[0];
  if (!run) {
    // A throttled, debounced or batching run woken by its event before it is due: its timer, not the next poll.
    if (row.next_at > now) wakeAt(ex, runId, Number(row.next_at));
    if ((limited || prioritized) && row.status !== "completed") {
      const set = ex.blocked.get(row.fn_id) ?? new Set();
      set.add(runId);
      ex.blocked.set(row.fn_id, set);
    }
    return null;
  }
  if (!fn) {
    await finish(ex, run, "failed", null, protocolError(`Function "${run.fn_id}" is not registered by any synced app`));
    return null;
  }
  return { run, fn };
}

export async function driveRun(ex: Executor, runId: string): Promise<void> {
  let acquired: Awaited<ReturnType<typeof acquire>>;
  const handed = ex.handedOff.get(runId);
  try {
    if (handed) ex.handedOff.delete(runId);
    acquired = handed ?? (await acquire(ex, runId));
  } catch (err) {
    ex.opts.log("error", `acquiring run ${runId} failed`, err);
    return;
  }
  if (!acquired) return;
  const { run, fn } = acquired;
  const event = JSON.parse(run.event) as StoredEvent;
  const ctx: Ctx = { run, fn, target: ex.targets.get(run.app_url) ?? { url: run.app_url }, event, events: JSON.parse(run.events), requestVersion: null };
  try {
    await loop(ex, ctx);
  } catch (err) {
    if (err instanceof LeaseLost) return;
    // An executor bug or a database error: keep the run, retry it later, keep the executor going.
    ex.opts.log("error", `driving run ${runId} failed`, err);
    await release(ex, ctx.run, "queued", Date.now() + ex.opts.backoff(0)).catch(() => undefined);
  } finally {
    unblock(ex, fn.id);
  }
}

async function loadState(ex: Executor, runId: string): Promise<State> {
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
  if (!row || row.lease_owner !== ex.workerId) throw new LeaseLost(runId);
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

/** A parallel step's call in flight; it settles with its outcome or its error, never rejects. */
type InFlight = Promise<{ id: string; again: boolean; result?: "continue" | "stop"; error?: unknown }>;

/**
 * Drive the run until it waits, sleeps or ends. Planned steps start as soon as they are runnable, each in its own
 * call; when one finishes, the run is called again (discovery) at once only as Inngest re-enters it
 * (pkg/execution/executor shouldEnqueueDiscovery): for an app on request version 1, or a race-mode step. Otherwise
 * (request version 2, the SDK's default) the parallel batch is coalesced: discovery waits for the last of its steps.
 * Steps already in flight are not started twice.
 *
 * A sleep, wait or invoke of one branch that resumes (its time is up, an event or a decision resolved it, a child run
 * ended) moves the run on whatever else is in flight, as Inngest enqueues a discovery when it resumes a pause or a
 * sleep (executor.go Resume, the KindSleep item: shouldEnqueueDiscovery) — unless ordinary (request version 2,
 * non-race) parallel steps are still pending, which Inngest coalesces into one discovery. While steps are in flight
 * the loop therefore also waits on a timer for the earliest pending due time and on wake() naming the run.
 */
async function loop(ex: Executor, ctx: Ctx): Promise<void> {
  const inFlight = new Map<string, InFlight>();
  // Settle every call in flight before leaving (their writes fail on the lease if the run moved on).
  const settle = async () => {
    await Promise.all(inFlight.values());
    inFlight.clear();
  };
  const runId = ctx.run.id;
  const signal: Signal = { poked: false, poke: null };
  const onWake = () => {
    signal.poked = true;
    signal.poke?.();
  };
  ex.signals.set(runId, onWake);
  let rediscover = false;
  /** The sleeps, waits and invokes pending at the previous load (null: none loaded yet in this drive). */
  let waits: PendingRow[] | null = null;
  try {
    for (;;) {
      if (!ex.running) {
        await settle();
        await release(ex, ctx.run, "queued", 0);
        return;
      }
      // A wake-up before this load is seen by it: the one noted for after the drive is not needed.
      signal.poked = false;
      ex.rewake.delete(runId);
      const state = await loadState(ex, runId);
      if (state.status !== "running") return;
      const now = Date.now();
      if (resumed(ctx, state, waits)) rediscover = true;
      waits = state.pending.filter((p) => p.kind !== "step");

      const expired = state.pending.filter((p) => p.kind !== "step" && p.due_at !== null && p.due_at <= now);
      if (expired.length > 0) {
        await guarded(ex, ctx, async (t) => {
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

      const runnable = state.pending.filter((p) => p.kind === "step" && (p.due_at ?? 0) <= now && !inFlight.has(p.hashed_id));
      if ((runnable.length > 0 || state.pending.length === 0) && ex.strict && state.steps.size >= ex.limits.maxSteps) {
        // Cloud checks the count before it runs anything more of the run, and fails it at once.
        await settle();
        const message = `The function run exceeded the step limit of ${ex.limits.maxSteps} steps.`;
        await finish(ex, ctx.run, "failed", null, cloudError("InngestErrFunctionOverflowed", message));
        return;
      }
      for (const p of runnable) {
        const again = ctx.requestVersion === 1 || p.race === 1;
        inFlight.set(
          p.hashed_id,
          runStep(ex, ctx, state, p).then(
            (result) => ({ id: p.hashed_id, again, result }),
            (error: unknown) => ({ id: p.hashed_id, again, error }),
          ),
        );
      }
      if (rediscover && (inFlight.size > 0 || state.pending.length > 0)) {
        // A step finished while its siblings still run, or while other branches of the run wait (an event, a sleep):
        // the run goes on from where that step's branch is, as Inngest enqueues the discovery whatever else is pending.
        rediscover = false;
        if ((await discover(ex, ctx, state, true)) === "stop") return;
        continue;
      }
      rediscover = false;
      if (inFlight.size > 0) {
        const done = await nextOutcome(inFlight, state, signal);
        if (done === null) continue; // a pending op is due, or the run was woken: look again
        inFlight.delete(done.id);
        if (done.error !== undefined) throw done.error;
        if (done.result === "stop") return;
        rediscover = done.again;
        continue;
      }

      if (state.pending.length > 0) {
        if (await park(ex, ctx, state)) return;
        continue;
      }

      const result = await discover(ex, ctx, state, false);
      if (result === "stop") return;
    }
  } finally {
    if (ex.signals.get(runId) === onWake) ex.signals.delete(runId);
    await settle();
  }
}

type Signal = { poked: boolean; poke: (() => void) | null };

/** setTimeout's longest delay; a due time further off (a wait without timeout) needs no timer while steps run. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The first call in flight to settle, or null when before that a pending op not in flight falls due (a sleep, a wait's
 * timeout, a step's retry) or wake() names the run (a wait resolved by an event or a decision, a cancel).
 */
async function nextOutcome(inFlight: Map<string, InFlight>, state: State, signal: Signal): Promise<Awaited<InFlight> | null> {
  if (signal.poked) return null;
  const dues = state.pending.filter((p) => !inFlight.has(p.hashed_id) && p.due_at !== null).map((p) => Number(p.due_at));
  const delay = dues.length > 0 ? Math.max(0, Math.min(...dues) - Date.now()) : Infinity;
  let timer: NodeJS.Timeout | undefined;
  const woken = new Promise<null>((resolve) => {
    signal.poke = () => resolve(null);
    if (delay <= MAX_TIMER_MS) timer = setTimeout(() => resolve(null), delay);
  });
  try {
    return await Promise.race([...inFlight.values(), woken]);
  } finally {
    signal.poke = null;
    if (timer) clearTimeout(timer);
  }
}

/**
 * Whether a sleep, wait or invoke resumed since the previous load and moves the run on now (a discovery from where its
 * branch is): on request version 1, for a race-mode op, or when no ordinary parallel step is pending (request version
 * 2 coalesces the batch: its last step's discovery comes when it ends). The first load of a drive cannot tell which
 * resumed: a run woken with only sleeps, waits and invokes left was woken by one of them resuming (or expiring below).
 */
function resumed(ctx: Ctx, state: State, before: PendingRow[] | null): boolean {
  if (before === null) return state.steps.size > 0 && state.pending.length > 0 && state.pending.every((p) => p.kind !== "step");
  const done = before.filter((p) => state.steps.has(p.hashed_id));
  if (done.length === 0) return false;
  if (ctx.requestVersion === 1 || done.some((p) => p.race === 1)) return true;
  return !state.pending.some((p) => p.kind === "step" && p.race !== 1);
}

/**
 * The call body. `disableImmediate` is set for targeted calls to parallel steps; a discovery (there is nothing
 * pending by then: the last parallel step is done, or the run resumed) clears it, as Inngest's v2 runs do. Apps whose
 * checkpoint calls reach this executor get `fn_id` and the dispatch token `qi_id`, which makes the SDK checkpoint.
 */
function body(ex: Executor, ctx: Ctx, state: State, attempt: number, disableImmediate: boolean): CallBody {
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
      ...(ctx.target.checkpointing ? { fn_id: ctx.fn.id, qi_id: dispatchToken(ex.workerId, ctx.run.generation) } : {}),
    },
    version: 2,
  };
}

async function call(ex: Executor, ctx: Ctx, stepId: string, body: CallBody): Promise<CallOutcome> {
  // Strict mode: a call may last as long as the host lets a function run; past it, the attempt fails as the host's
  // timeout would fail it (and is retried like one).
  const limited = ex.strict !== null && ex.limits.maxStepDurationMs < ex.opts.requestTimeoutMs;
  return callFunction({
    target: ctx.target,
    fnId: ctx.fn.id,
    stepId,
    body,
    timeoutMs: limited ? ex.limits.maxStepDurationMs : ex.opts.requestTimeoutMs,
    runId: ctx.run.id,
    dispatch: { requestId: ulid(), generation: ctx.run.generation },
    timeoutReason: limited
      ? `over the step duration limit of ${ex.limits.maxStepDurationMs / 1000} s (GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS), which a serverless host enforces by ending the call`
      : undefined,
  });
}

/** The reply to a dispatch this executor fenced (409 to its checkpoint) is ignored; the run is not failed for it. */
function isStaleDispatch(outcome: CallOutcome): boolean {
  return outcome.kind === "error" && outcome.error.name === "StaleDispatchError";
}

/** `midBatch`: parallel steps are still in flight (their sibling finished first); the SDK must plan, not run, steps. */
async function discover(ex: Executor, ctx: Ctx, state: State, midBatch: boolean): Promise<"continue" | "stop"> {
  const outcome = await call(ex, ctx, "step", body(ex, ctx, state, state.attempt, midBatch));
  if (isStaleDispatch(outcome)) return "continue";
  if (outcome.kind === "ops" && outcome.requestVersion !== undefined) ctx.requestVersion = outcome.requestVersion;
  if (outcome.kind === "complete") {
    await finish(ex, ctx.run, "completed", outcome.data, null);
    return "stop";
  }
  if (outcome.kind === "error") return functionError(ex, ctx, state, outcome.error, outcome.retriable, outcome.retryAfterMs);
  return handleOps(ex, ctx, state, outcome.ops, undefined, outcome.retryAfterMs, midBatch);
}

async function runStep(ex: Executor, ctx: Ctx, state: State, p: PendingRow): Promise<"continue" | "stop"> {
  const outcome = await call(ex, ctx, p.hashed_id, body(ex, ctx, state, p.attempt, true));
  if (isStaleDispatch(outcome)) return "continue";
  if (outcome.kind === "ops" && outcome.requestVersion !== undefined) ctx.requestVersion = outcome.requestVersion;
  if (outcome.kind === "ops") return handleOps(ex, ctx, state, outcome.ops, p, outcome.retryAfterMs);
  if (outcome.kind === "complete") {
    await finish(ex, ctx.run, "completed", outcome.data, null);
    return "stop";
  }
  if (!outcome.retriable) return functionError(ex, ctx, state, outcome.error, false);
  // The call itself failed (endpoint down, bad answer): count it against the step.
  await guarded(ex, ctx, (t) => stepFailedAttempt(ex, t, ctx, p.hashed_id, p.attempt, outcome.error, outcome.retryAfterMs, p));
  return "continue";
}
