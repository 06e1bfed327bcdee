import { newUlid as ulid } from "@/lib/ids";
import { waitMatchKey, type WaitMatchKey } from "./cel";
import { checkpointHooks } from "./checkpoint";
import { hasListeners, ingestInTx, recordEntry, resolvePending, resolveWaitFromHistory } from "./events";
import { deadline, protocolError, sleepUntil, toSerializedError, type OutgoingOp, type SerializedError } from "./protocol";
import { createRun, FAILURE_EVENT, FINISHED_EVENT, getRegistry, INVOKE_EVENT, type StoredEvent } from "./registry";
import { FAR_FUTURE, guarded, LeaseLost, unblock, wake, wakeAt, type Ctx, type State } from "./scheduling";
import { rows, TERMINAL_SQL, tx, type LeasedRun, type PendingRow, type Tx } from "./store";
import type { Executor } from "./executor";

/**
 * Waits and events: what a reply's ops store (step results, retries, planned steps, sleeps, waits for events, invokes),
 * Cloud's state limits on them, and how a run leaves its lease: parked until a pending op is due, released, retried
 * after a function error, or finished (telling an invoking parent and announcing function.finished / function.failed).
 */

/** An error as Inngest Cloud stores it for a run it failed (`{error, name, message}`). */
export function cloudError(name: string, message: string): SerializedError {
  return { name, message, error: `${name}: ${message}` };
}

/** A run that made no progress (its app reported only what is already recorded) is retried this often, then failed. */
export const NO_PROGRESS_LIMIT = 4;

export async function stepFailedAttempt(
  ex: Executor,
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
    else await record(t, ctx, hashedId, { error });
    return;
  }
  const dueAt = Date.now() + (retryAfterMs ?? ex.opts.backoff(attempt));
  await t.execute({
    sql: `INSERT INTO executor_pending (run_id, hashed_id, kind, op, attempt, due_at, created_at) VALUES (?, ?, 'step', ?, ?, ?, ?)
          ON CONFLICT(run_id, hashed_id) DO UPDATE SET attempt = excluded.attempt, due_at = excluded.due_at`,
    args: [ctx.run.id, hashedId, existing?.op ?? "{}", attempt + 1, dueAt, Date.now()],
  });
}

async function record(t: Tx, ctx: Ctx, hashedId: string, result: unknown): Promise<boolean> {
  return recordEntry(t, { runId: ctx.run.id, hashedId, result, kind: "step" });
}

export async function handleOps(
  ex: Executor,
  ctx: Ctx,
  state: State,
  ops: OutgoingOp[],
  target: PendingRow | undefined,
  retryAfterMs: number | undefined,
  /** A discovery while parallel steps are in flight: a reply with nothing new is no spin, the run waits for them. */
  midBatch = false,
): Promise<"continue" | "stop"> {
  const known = new Set(["StepRun", "StepError", "StepFailed", "StepPlanned", "Sleep", "WaitForEvent", "InvokeFunction", "RunComplete"]);
  const unknown = ops.find((o) => !known.has(o.op));
  if (unknown) {
    return functionError(ex, ctx, state, protocolError(`Unsupported op "${unknown.op}" from ${ctx.target.url} (step ${unknown.id})`), true);
  }
  const invalid = ops.map((o) => validateOp(o)).find((m) => m !== null);
  if (invalid) return functionError(ex, ctx, state, protocolError(`${invalid} from ${ctx.target.url}`), true);
  const overLimit = checkStateLimits(ex, state, ops);
  if (overLimit) return functionError(ex, ctx, state, overLimit, false);
  // A checkpointing app finishes with 206 [...buffered StepRuns, RunComplete]: the run is complete.
  const complete = ops.find((o) => o.op === "RunComplete");
  if (complete) {
    await finish(ex, ctx.run, "completed", complete.data ?? null, null);
    return "stop";
  }
  // The same seam as a checkpoint's (crash tests): a step's side effects done, its result reported, not stored yet.
  if (checkpointHooks.beforeStore && ops.some((o) => o.op === "StepRun")) await checkpointHooks.beforeStore(ctx.run.id);
  const registry = await getRegistry();
  const now = Date.now();
  const progressed = await guarded(
    ex,
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
          // Not if it has a result by now: a discovery made while parallel steps ran (race mode, request version 1)
          // reports a sibling that finished during the call as planned again; Inngest dedupes that step's job.
          const r = await t.execute({
            sql: `INSERT INTO executor_pending (run_id, hashed_id, kind, op, attempt, due_at, event_name, expression, match_path, match_value, race, created_at)
                  SELECT ?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?9, ?10, ?11
                   WHERE NOT EXISTS (SELECT 1 FROM executor_steps WHERE run_id = ?1 AND hashed_id = ?2)
                  ON CONFLICT(run_id, hashed_id) DO NOTHING`,
            args: [ctx.run.id, op.id, kind, JSON.stringify(op), dueAt, eventName, expression, key?.path ?? null, key?.value ?? null, race, now],
          });
          if (r.rowsAffected > 0) changed = true;
        };
        switch (op.op) {
          case "StepRun":
            if (isTarget) changed = (await resolvePending(t, { runId: ctx.run.id, hashedId: op.id, result: { data: op.data ?? null }, kind: "step" })) || changed;
            else changed = (await record(t, ctx, op.id, { data: op.data ?? null })) || changed;
            break;
          case "StepFailed":
            if (isTarget) changed = (await resolvePending(t, { runId: ctx.run.id, hashedId: op.id, result: { error: op.error ?? null }, kind: "step" })) || changed;
            else changed = (await record(t, ctx, op.id, { error: op.error ?? null })) || changed;
            break;
          case "StepError": {
            const existing = state.pending.find((p) => p.hashed_id === op.id);
            await stepFailedAttempt(ex, t, ctx, op.id, existing?.attempt ?? 0, op.error ?? null, retryAfterMs, existing);
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
            if (!ex.strict && ex.opts.waitLookBack) {
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
              await record(t, ctx, op.id, { error: { name: "Error", message: `Invoked function "${fnId}" is not registered` } });
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
  if (progressed || midBatch) return "continue";
  // The app reported only ops that already have results: calling it again at once would spin. Back off, and after
  // NO_PROGRESS_LIMIT such calls fail the run with an error that says so.
  const ids = [...new Set(ops.map((o) => `${o.op} ${o.id}`))].join(", ");
  return functionError(
    ex,
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
function checkStateLimits(ex: Executor, state: State, ops: OutgoingOp[]): SerializedError | null {
  let added = 0;
  for (const op of ops) {
    if (state.steps.has(op.id)) continue;
    if (op.op !== "StepRun" && op.op !== "StepFailed") continue;
    const bytes = Buffer.byteLength(JSON.stringify(op.op === "StepRun" ? { data: op.data ?? null } : { error: op.error ?? null }));
    if (bytes > ex.limits.maxStepOutputBytes) {
      return {
        ...cloudError("InngestErrStepOutputTooLarge", "step output size is greater than the limit"),
        step: op.displayName ?? op.name ?? op.id,
        bytes,
        limit: ex.limits.maxStepOutputBytes,
      };
    }
    added += bytes;
  }
  if (added > 0 && state.stateBytes + added > ex.limits.maxRunStateBytes) {
    return cloudError("InngestErrStateOverflowed", `The function run exceeded the state size limit of ${ex.limits.maxRunStateBytes} bytes.`);
  }
  return null;
}

export async function functionError(
  ex: Executor,
  ctx: Ctx,
  state: State,
  error: SerializedError,
  retriable: boolean,
  retryAfterMs?: number,
  retries: number = ctx.fn.retries,
): Promise<"continue" | "stop"> {
  if (retriable) {
    // The attempt is read in the write: checkpoints during the call may have reset it (a fresh budget per step).
    const at = await guarded(ex, ctx, async (t) => {
      const [row] = await rows<{ attempt: number }>(t, "SELECT attempt FROM executor_runs WHERE id = ?", [ctx.run.id]);
      const attempt = Number(row?.attempt ?? state.attempt);
      if (attempt >= retries) return null;
      const at = Date.now() + (retryAfterMs ?? ex.opts.backoff(attempt));
      await t.execute({
        sql: "UPDATE executor_runs SET attempt = attempt + 1, error = ?, status = 'queued', next_at = ?, lease_owner = NULL, lease_until = 0 WHERE id = ?",
        args: [JSON.stringify(error), at, ctx.run.id],
      });
      return at;
    });
    if (at !== null) {
      wakeAt(ex, ctx.run.id, at);
      unblock(ex, ctx.fn.id);
      return "stop";
    }
  }
  await finish(ex, ctx.run, "failed", null, error);
  return "stop";
}

export async function park(ex: Executor, ctx: Ctx, state: State): Promise<boolean> {
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
      args: [status, nextAt, ctx.run.id, ex.workerId],
    });
    if (r.rowsAffected === 0) throw new LeaseLost(ctx.run.id);
    return nextAt;
  });
  if (parked === null) return false;
  wakeAt(ex, ctx.run.id, parked);
  unblock(ex, ctx.fn.id);
  return true;
}

export async function release(ex: Executor, run: LeasedRun, status: string, nextAt: number): Promise<void> {
  await tx((t) =>
    t.execute({
      sql: "UPDATE executor_runs SET status = ?, next_at = ?, lease_owner = NULL, lease_until = 0 WHERE id = ? AND lease_owner = ? AND status = 'running'",
      args: [status, nextAt, run.id, ex.workerId],
    }),
  );
  wakeAt(ex, run.id, nextAt);
}

/** Complete or fail a run; tell an invoking parent, and announce failures for onFailure handlers. */
export async function finish(ex: Executor, run: LeasedRun, status: "completed" | "failed", output: unknown, error: SerializedError | null): Promise<void> {
  const registry = await getRegistry();
  const now = Date.now();
  const woken = await tx(async (t) => {
    const r = await t.execute({
      sql: `UPDATE executor_runs SET status = ?, output = ?, error = ?, ended_at = ?, lease_owner = NULL, lease_until = 0
            WHERE id = ? AND lease_owner = ? AND status NOT IN ${TERMINAL_SQL}`,
      args: [status, status === "completed" ? JSON.stringify(output ?? null) : null, error ? JSON.stringify(error) : null, now, run.id, ex.workerId],
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
  if (woken.length > 0) wake(ex, woken);
  ex.opts.onRunFinished({ id: run.id, fnId: run.fn_id, status });
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
