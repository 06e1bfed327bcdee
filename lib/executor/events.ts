import { newUlid as ulid } from "@/lib/ids";
import { z } from "zod";
import { celMatches, eventMatchValue, type WaitMatchKey } from "./cel";
import { parseDuration } from "./protocol";
import { CANCELLED_EVENT, createRun, getRegistry, triggerMatches, type Registry, type StoredEvent } from "./registry";
import { rows, TERMINAL_SQL, tx, type Tx } from "./store";

/**
 * Event ingestion: store (deduped by id for 24 h, numbered by a monotonic `seq`), start triggered runs, resolve
 * matching waitForEvent waits and apply cancelOn — all in the transaction that stores the event, so an event and a
 * wait stored at the same instant always meet (the wait's side looks back at events, see resolveWaitFromHistory).
 */

export const DEDUPE_MS = 86_400_000;

/** How waits were resolved in this process (observability, and proof in tests that the look-back path is taken). */
export const waitStats = { byIncomingEvent: 0, fromHistory: 0 };

export const eventSchema = z.looseObject({
  name: z.string().trim().min(1, "event name is required"),
  data: z.record(z.string(), z.unknown()).nullish(),
  id: z.string().min(1).nullish(),
  ts: z.number().nullish(),
  v: z.string().nullish(),
  user: z.unknown().optional(),
});

type ParsedEvent = z.infer<typeof eventSchema>;

const noneOr = (v: unknown, ok: (v: unknown) => boolean) => v === undefined || v === null || ok(v);

/**
 * An event as senders send it, checked by hand with eventSchema's rules (a name that needs no trimming), without zod's
 * per-call cost on the hot path. Anything it does not accept goes to the schema, which accepts (trimming the name) or
 * refuses it with its message (tests/executor/event-shape.test.ts).
 */
export function plainEvent(item: unknown): ParsedEvent | null {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return null;
  const e = item as Record<string, unknown>;
  if (typeof e.name !== "string" || e.name.length === 0 || e.name.trim() !== e.name) return null;
  if (!noneOr(e.data, (d) => typeof d === "object" && !Array.isArray(d) && Object.getPrototypeOf(d) === Object.prototype)) return null;
  if (!noneOr(e.id, (id) => typeof id === "string" && id.length > 0)) return null;
  if (!noneOr(e.ts, (ts) => typeof ts === "number" && Number.isFinite(ts))) return null;
  if (!noneOr(e.v, (v) => typeof v === "string")) return null;
  return e as ParsedEvent;
}

export class EventValidationError extends Error {
  constructor(
    message: string,
    /** The HTTP status the event API answers with: 400, or 413 for an event over the size limit. */
    readonly status: 400 | 413 = 400,
  ) {
    super(message);
    this.name = "EventValidationError";
  }
}

/** `maxEventBytes`: strict mode's per-event limit (Inngest's 256 KiB by default); refused whole, nothing stored. */
export function parseEvents(input: unknown, { maxEventBytes }: { maxEventBytes?: number | null } = {}): ParsedEvent[] {
  const list = Array.isArray(input) ? input : [input];
  if (list.length === 0) throw new EventValidationError("no events given");
  if (maxEventBytes) {
    list.forEach((item, i) => {
      const bytes = Buffer.byteLength(JSON.stringify(item) ?? "");
      if (bytes > maxEventBytes) {
        throw new EventValidationError(
          `event ${i}: event payload is too large: ${bytes} bytes, over the limit of ${maxEventBytes} bytes (GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES)`,
          413,
        );
      }
    });
  }
  return list.map((item, i) => {
    const plain = plainEvent(item);
    if (plain) return plain;
    const parsed = eventSchema.safeParse(item);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new EventValidationError(`event ${i}: ${issue?.path.join(".") || "body"}: ${issue?.message}`);
    }
    return parsed.data;
  });
}

/** `fns`: the function of each run in `woken` that the ingest knows it of (a run it started, a wait it resolved). */
export type IngestResult = { ids: string[]; woken: string[]; fns?: Map<string, string> };

/**
 * Who may lease the runs an ingest makes runnable inside its transaction (scheduling.ts localHandoff): `take` returns
 * the runs it leased; `drop` is told if that transaction then did not commit.
 */
export type Handoff = {
  take(t: Tx, runIds: string[], registry: Registry, now: number, fns?: Map<string, string>): Promise<string[]>;
  drop(runIds: string[]): void;
};

export async function ingestEvents(
  input: unknown,
  { maxEventBytes, handoff }: { maxEventBytes?: number | null; handoff?: Handoff } = {},
): Promise<IngestResult> {
  const events = parseEvents(input, { maxEventBytes });
  const registry = await getRegistry();
  let taken: string[] = [];
  try {
    return await tx(async (t) => {
      const now = Date.now();
      const result = await ingestInTx(t, events, registry, now);
      if (handoff && result.woken.length > 0) taken = await handoff.take(t, result.woken, registry, now, result.fns);
      return result;
    });
  } catch (err) {
    if (taken.length > 0) handoff?.drop(taken);
    throw err;
  }
}

export async function ingestInTx(
  t: Tx,
  events: z.infer<typeof eventSchema>[],
  registry: Registry,
  now: number,
): Promise<IngestResult> {
  const ids: string[] = [];
  const woken: string[] = [];
  const fns = new Map<string, string>();
  for (const raw of events) {
    const event: StoredEvent = {
      ...raw,
      id: raw.id ?? ulid(),
      name: raw.name,
      data: (raw.data ?? {}) as Record<string, unknown>,
      ts: raw.ts ?? now,
    } as StoredEvent;
    if (raw.v == null) delete (event as { v?: unknown }).v;
    ids.push(event.id);
    // A re-sent id within 24 h is a duplicate; an older row with that id is forgotten first. An id made here is new.
    if (raw.id != null) await t.execute({ sql: "DELETE FROM executor_events WHERE id = ? AND received_at <= ?", args: [event.id, now - DEDUPE_MS] });
    const payload = JSON.stringify(event);
    // `seq` is the table's rowid: the INSERT's own rowid, without RETURNING (a row-reading write, slower on the native
    // binding). A duplicate changes no row.
    const inserted = await t.execute({
      sql: "INSERT INTO executor_events (id, name, payload, received_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
      args: [event.id, event.name, payload, now],
    });
    if (inserted.rowsAffected === 0) continue;
    const seq = Number(inserted.lastInsertRowid);

    const cancelled: string[] = [];
    for (const fn of registry.byEvent.get(event.name) ?? []) {
      if (!triggerMatches(fn, event)) continue;
      const runId = await createRun(t, { fn, event, runId: ulid(), now, watermark: seq, cancelled });
      if (runId) {
        woken.push(runId);
        fns.set(runId, fn.id);
      }
    }
    for (const id of cancelled) woken.push(...(await announceCancelled(t, registry, id, now)));
    woken.push(...(await resolveWaits(t, event, payload, seq, fns)));
    woken.push(...(await applyCancels(t, event, registry, now)));
  }
  return { ids, woken, fns };
}

/** What resolveWaits reads of a wait and its run. */
type WaitRow = { run_id: string; hashed_id: string; expression: string | null; race: number; trigger: string; fn_id: string };
const WAIT_COLUMNS = `SELECT p.run_id, p.hashed_id, p.expression, p.race, r.event AS trigger, r.fn_id FROM executor_pending p
  JOIN executor_runs r ON r.id = p.run_id`;

/** resolveWaits' queries (tests/executor/run-indexes.test.ts holds them to executor_pending_wait_idx). */
export const WAIT_SQL = {
  /** The first key path among the waits of event ?1, and whether any of them has no key: one statement for both. */
  first: `SELECT (SELECT match_path FROM executor_pending WHERE kind = 'wait' AND event_name = ?1 AND match_path > '' ORDER BY match_path LIMIT 1) AS path,
    EXISTS (SELECT 1 FROM executor_pending WHERE kind = 'wait' AND event_name = ?1 AND match_path IS NULL) AS unkeyed`,
  /** The next key path after ?2 among the waits of event ?1. */
  nextPath: `SELECT match_path FROM executor_pending WHERE kind = 'wait' AND event_name = ? AND match_path > ? ORDER BY match_path LIMIT 1`,
  /** The waits of event ?1 keyed on path ?2 with value ?3. */
  keyed: `${WAIT_COLUMNS} WHERE p.kind = 'wait' AND p.event_name = ? AND p.match_path = ? AND p.match_value = ? AND r.status NOT IN ${TERMINAL_SQL}`,
  /** The waits of event ?1 without a key. */
  unkeyed: `${WAIT_COLUMNS} WHERE p.kind = 'wait' AND p.event_name = ? AND p.match_path IS NULL AND r.status NOT IN ${TERMINAL_SQL}`,
} as const;

/**
 * The waits an event resolves. A wait with a match key (`event.<a> == async.<b>`, cel.ts waitMatchKey) is found through
 * the index by the event's own value at `<b>`, one lookup per distinct key path among the waits of this name; the
 * others (any other expression, or none) are evaluated with CEL one by one, as Inngest's expressions are. So an event
 * costs the same however many runs wait on the same name for other values (runs at an approval gate, say).
 */
async function resolveWaits(t: Tx, event: StoredEvent, payload: string, seq: number, fns: Map<string, string>): Promise<string[]> {
  const waits: WaitRow[] = [];
  // The distinct key paths, read as a skip scan of the index: one seek per path, not one row per wait. The first seek
  // also says whether there are waits without a key (an event nobody waits for costs this one read).
  const [first] = await rows<{ path: string | null; unkeyed: number }>(t, WAIT_SQL.first, [event.name]);
  for (let path = first?.path ?? null; path !== null; ) {
    const value = eventMatchValue(event, path);
    if (value !== null) waits.push(...(await rows<WaitRow>(t, WAIT_SQL.keyed, [event.name, path, value])));
    const [next] = await rows<{ match_path: string }>(t, WAIT_SQL.nextPath, [event.name, path]);
    path = next?.match_path ?? null;
  }
  if (Number(first?.unkeyed) === 1) waits.push(...(await rows<WaitRow>(t, WAIT_SQL.unkeyed, [event.name])));
  const woken: string[] = [];
  for (const w of waits) {
    // A keyed wait is checked with CEL all the same: the key found it, the expression decides.
    if (w.expression && !celMatches(w.expression, { event: JSON.parse(w.trigger), async: event })) continue;
    // The wait's result is the event as stored: its JSON is the payload's, not serialised again; whether it races is
    // known from the row just read.
    await resolvePending(t, { runId: w.run_id, hashedId: w.hashed_id, result: event, json: payload, seq, race: Number(w.race) });
    waitStats.byIncomingEvent++;
    woken.push(w.run_id);
    fns.set(w.run_id, w.fn_id);
  }
  return woken;
}

/**
 * The look-back window of a wait (documented in README, "Waits and early events"): a wait matches events ingested
 * after the moment the run reached it, read from the run's own step history. Every history entry stores `event_seq`:
 * - a step's result (step.run, sendEvent, a step error): the point where the run *began* that step, i.e. where the
 *   entry before it ended (the run's watermark). Events the step itself caused (it showed a gate, sent a request)
 *   may arrive before its result is recorded, and must still meet a wait that follows it.
 * - a resumption (a sleep woke, a wait matched or timed out, an invoke returned): the point where the run resumed,
 *   i.e. the matched event's seq, or the newest seq at that moment.
 * The run's `watermark` is where its latest entry ended (the triggering event's seq before any). A new wait looks
 * back to the `event_seq` of the run's latest entry (or the watermark if there is none), whatever the transport and
 * however the steps before it were reported (206 or checkpoint).
 */
export type EntryKind = "step" | "resume";

/** Record one history entry (a duplicate hashed id is ignored, as Inngest does). Returns whether it was new. */
export async function recordEntry(
  t: Tx,
  { runId, hashedId, result, kind, seq }: { runId: string; hashedId: string; result: unknown; kind: EntryKind; seq?: number },
): Promise<boolean> {
  const json = JSON.stringify(result ?? null);
  if (!(await insertEntry(t, { runId, hashedId, json, kind, seq }))) return false;
  await updateWatermark(t, runId, kind, seq, json);
  return true;
}

/** After a new entry: the run's watermark moves to where it ended, and its state grows by the entry. */
async function updateWatermark(t: Tx, runId: string, kind: EntryKind, seq: number | undefined, json: string): Promise<void> {
  await t.execute({
    sql: `UPDATE executor_runs SET watermark = coalesce(?2, (SELECT coalesce(max(seq), 0) FROM executor_events)),
            state_bytes = state_bytes + ?3 WHERE id = ?1`,
    args: [runId, kind === "resume" ? (seq ?? null) : null, Buffer.byteLength(json)],
  });
}

/** recordEntry's INSERT (its `event_seq` as described above); whether the entry was new. */
async function insertEntry(
  t: Tx,
  { runId, hashedId, json, kind, seq }: { runId: string; hashedId: string; json: string; kind: EntryKind; seq?: number },
): Promise<boolean> {
  const inserted =
    kind === "step"
      ? await t.execute({
          sql: `INSERT INTO executor_steps (run_id, hashed_id, result, event_seq, created_at)
                VALUES (?1, ?2, ?3, (SELECT watermark FROM executor_runs WHERE id = ?1), ?4) ON CONFLICT DO NOTHING`,
          args: [runId, hashedId, json, Date.now()],
        })
      : await t.execute({
          sql: `INSERT INTO executor_steps (run_id, hashed_id, result, event_seq, created_at)
                VALUES (?1, ?2, ?3, coalesce(?4, (SELECT coalesce(max(seq), 0) FROM executor_events)), ?5) ON CONFLICT DO NOTHING`,
          args: [runId, hashedId, json, seq ?? null, Date.now()],
        });
  return inserted.rowsAffected > 0;
}

/**
 * Record a result for a pending op of a parked (or running) run and make it runnable. A race-mode op cancels its
 * siblings: the function continues after the first of them. `kind` says whether the result ends a step the run ran
 * ("step") or resumes it from a sleep, wait or invoke ("resume", with the matched event's `seq` for waits).
 */
export async function resolvePending(
  t: Tx,
  {
    runId,
    hashedId,
    result,
    json = JSON.stringify(result ?? null),
    kind = "resume",
    seq,
    race: known,
  }: {
    runId: string;
    hashedId: string;
    result: unknown;
    /** `result`'s JSON, if the caller has it. */
    json?: string;
    kind?: EntryKind;
    seq?: number;
    /** The pending row's `race`, if the caller read it in this transaction: the DELETE then reads no row back. */
    race?: number;
  },
): Promise<boolean> {
  let race: number;
  if (known === undefined) {
    const del = await t.execute({
      sql: "DELETE FROM executor_pending WHERE run_id = ? AND hashed_id = ? RETURNING race",
      args: [runId, hashedId],
    });
    if (del.rows.length === 0) return false;
    race = Number(del.rows[0]!.race);
  } else {
    const del = await t.execute({ sql: "DELETE FROM executor_pending WHERE run_id = ? AND hashed_id = ?", args: [runId, hashedId] });
    if (del.rowsAffected === 0) return false;
    race = known;
  }
  if (race !== 1) {
    // The usual case: the entry, then recordEntry's UPDATE of the run (history watermark, state size) and its wake-up
    // in one statement.
    const recorded = await insertEntry(t, { runId, hashedId, json, kind, seq });
    await t.execute(
      recorded
        ? {
            sql: `UPDATE executor_runs SET watermark = coalesce(?2, (SELECT coalesce(max(seq), 0) FROM executor_events)),
                    state_bytes = state_bytes + ?3, next_at = 0,
                    status = CASE WHEN status IN ('waiting','sleeping') THEN 'queued' ELSE status END
                  WHERE id = ?1`,
            args: [runId, kind === "resume" ? (seq ?? null) : null, Buffer.byteLength(json)],
          }
        : { sql: WAKE_SQL, args: [runId] },
    );
    return true;
  }
  // The result goes into the stack before the race losers below: the SDK resolves memoized steps in stack order.
  if (await insertEntry(t, { runId, hashedId, json, kind, seq })) await updateWatermark(t, runId, kind, seq, json);
  // The race is won: timers and waits that lost it resolve as if they had timed out (null), a losing invoke with
  // an error, so the SDK sees state for every op and can return. Losing step.run calls still run to completion.
  const losers = await t.execute({
    sql: "DELETE FROM executor_pending WHERE run_id = ? AND race = 1 AND kind <> 'step' RETURNING hashed_id, kind",
    args: [runId],
  });
  for (const loser of losers.rows) {
    const lost = loser.kind === "invoke" ? { error: { name: "Error", message: "Lost a parallel race" } } : null;
    await t.execute({
      sql: `INSERT INTO executor_steps (run_id, hashed_id, result, event_seq, created_at)
            VALUES (?1, ?2, ?3, (SELECT watermark FROM executor_runs WHERE id = ?1), ?4) ON CONFLICT DO NOTHING`,
      args: [runId, String(loser.hashed_id), JSON.stringify(lost), Date.now()],
    });
  }
  await t.execute({ sql: WAKE_SQL, args: [runId] });
  return true;
}

/** A run with a result for its pending op is runnable (again) at once. */
const WAKE_SQL = `UPDATE executor_runs SET next_at = 0, status = CASE WHEN status IN ('waiting','sleeping') THEN 'queued' ELSE status END
  WHERE id = ?`;

/**
 * Called when a wait is stored: the first matching event since the run reached the wait (see recordEntry) resolves
 * it at once.
 */
export async function resolveWaitFromHistory(
  t: Tx,
  { runId, hashedId, eventName, expression, key, trigger }: {
    runId: string;
    hashedId: string;
    eventName: string;
    expression: string | null;
    /** The wait's match key (cel.ts waitMatchKey), as stored with it. */
    key: WaitMatchKey | null;
    trigger: unknown;
  },
): Promise<boolean> {
  const [from] = await rows<{ s: number }>(
    t,
    `SELECT coalesce((SELECT event_seq FROM executor_steps WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1),
                     (SELECT watermark FROM executor_runs WHERE id = ?1), 0) AS s`,
    [runId],
  );
  const since = Number(from?.s ?? 0);
  // A keyed wait (a `match`, say) narrows the candidates in SQL before CEL decides: by a string or number value, which
  // json_extract gives back as SQL compares it.
  const value = key ? (JSON.parse(key.value) as unknown) : undefined;
  const narrow = key !== null && (typeof value === "string" || typeof value === "number");
  const candidates = await rows<{ seq: number; payload: string }>(
    t,
    narrow
      ? "SELECT seq, payload FROM executor_events WHERE name = ? AND seq > ? AND json_extract(payload, ?) = ? ORDER BY seq"
      : "SELECT seq, payload FROM executor_events WHERE name = ? AND seq > ? ORDER BY seq",
    narrow ? [eventName, since, `$.${key.path}`, value] : [eventName, since],
  );
  for (const c of candidates) {
    const event = JSON.parse(c.payload) as StoredEvent;
    if (expression && !celMatches(expression, { event: trigger, async: event })) continue;
    waitStats.fromHistory++;
    return resolvePending(t, { runId, hashedId, result: event, seq: Number(c.seq) });
  }
  return false;
}

async function applyCancels(t: Tx, event: StoredEvent, registry: Registry, now: number): Promise<string[]> {
  const woken: string[] = [];
  for (const fn of registry.cancelsByEvent.get(event.name) ?? []) {
    for (const cancel of fn.config.cancel ?? []) {
      if (cancel.event !== event.name) continue;
      const runs = await rows<{ id: string; event: string; created_at: number }>(
        t,
        `SELECT id, event, created_at FROM executor_runs WHERE fn_id = ? AND status NOT IN ${TERMINAL_SQL}`,
        [fn.id],
      );
      // cancelOn `timeout`: the cancelling event only counts within that long after the run was triggered.
      const windowMs = cancel.timeout ? parseDuration(cancel.timeout) : null;
      for (const run of runs) {
        if (windowMs !== null && now > Number(run.created_at) + windowMs) continue;
        if (cancel.if && !celMatches(cancel.if, { event: JSON.parse(run.event), async: event })) continue;
        woken.push(...(await cancelRunInTx(t, run.id, now, registry)));
      }
    }
  }
  return woken;
}

/**
 * Cancel a run (cancelOn, timeouts, the API). With the registry, `inngest/function.cancelled` is announced; returns the
 * runs that woke.
 */
export async function cancelRunInTx(t: Tx, runId: string, now: number, registry?: Registry): Promise<string[]> {
  const r = await t.execute({
    sql: `UPDATE executor_runs SET status = 'cancelled', ended_at = ?, lease_owner = NULL, lease_until = 0
          WHERE id = ? AND status NOT IN ${TERMINAL_SQL}`,
    args: [now, runId],
  });
  await t.execute({ sql: "DELETE FROM executor_pending WHERE run_id = ?", args: [runId] });
  return r.rowsAffected > 0 && registry ? announceCancelled(t, registry, runId, now) : [];
}

/** Whether a system event would reach anyone: a function triggered by it, or a run waiting for it. */
export async function hasListeners(t: Tx, registry: Registry, name: string): Promise<boolean> {
  if (registry.byEvent.has(name)) return true;
  const [wait] = await rows(t, "SELECT 1 FROM executor_pending WHERE kind = 'wait' AND event_name = ? LIMIT 1", [name]);
  return wait !== undefined;
}

/**
 * `inngest/function.cancelled` (data: function_id, run_id, event, error "function cancelled"), as Inngest sends for
 * cancelOn, timeouts and API cancellation. Only when someone listens; a run started by a system function event
 * announces nothing, so a listener cannot trigger itself forever.
 */
async function announceCancelled(t: Tx, registry: Registry, runId: string, now: number): Promise<string[]> {
  const [run] = await rows<{ fn_id: string; event: string }>(t, "SELECT fn_id, event FROM executor_runs WHERE id = ?", [runId]);
  if (!run) return [];
  const trigger = JSON.parse(run.event) as StoredEvent;
  if (trigger.name.startsWith("inngest/function.") || !(await hasListeners(t, registry, CANCELLED_EVENT))) return [];
  const data = { function_id: run.fn_id, run_id: runId, event: trigger, error: { name: "Error", message: "function cancelled" } };
  return (await ingestInTx(t, [{ name: CANCELLED_EVENT, data }], registry, now)).woken;
}
