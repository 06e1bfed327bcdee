import { ulid } from "ulid";
import { z } from "zod";
import { celMatches } from "./cel";
import { createRun, getRegistry, triggerMatches, type Registry, type StoredEvent } from "./registry";
import { rows, TERMINAL_SQL, tx, type Tx } from "./store";

/**
 * Event ingestion: store (deduped by id for 24 h, numbered by a monotonic `seq`), start triggered runs, resolve
 * matching waitForEvent waits and apply cancelOn — all in the transaction that stores the event, so an event and a
 * wait stored at the same instant always meet (the wait's side looks back at events, see resolveWaitFromHistory).
 */

export const DEDUPE_MS = 86_400_000;

/** How waits were resolved in this process (observability, and proof in tests that the look-back path is taken). */
export const waitStats = { byIncomingEvent: 0, fromHistory: 0 };

const eventSchema = z.looseObject({
  name: z.string().trim().min(1, "event name is required"),
  data: z.record(z.string(), z.unknown()).nullish(),
  id: z.string().min(1).nullish(),
  ts: z.number().nullish(),
  v: z.string().nullish(),
  user: z.unknown().optional(),
});

export class EventValidationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EventValidationError";
  }
}

export function parseEvents(input: unknown): z.infer<typeof eventSchema>[] {
  const list = Array.isArray(input) ? input : [input];
  if (list.length === 0) throw new EventValidationError("no events given");
  return list.map((item, i) => {
    const parsed = eventSchema.safeParse(item);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new EventValidationError(`event ${i}: ${issue?.path.join(".") || "body"}: ${issue?.message}`);
    }
    return parsed.data;
  });
}

export type IngestResult = { ids: string[]; woken: string[] };

export async function ingestEvents(input: unknown): Promise<IngestResult> {
  const events = parseEvents(input);
  const registry = await getRegistry();
  return tx((t) => ingestInTx(t, events, registry, Date.now()));
}

export async function ingestInTx(
  t: Tx,
  events: z.infer<typeof eventSchema>[],
  registry: Registry,
  now: number,
): Promise<IngestResult> {
  const ids: string[] = [];
  const woken: string[] = [];
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
    // A re-sent id within 24 h is a duplicate; an older row with that id is forgotten first.
    await t.execute({ sql: "DELETE FROM executor_events WHERE id = ? AND received_at <= ?", args: [event.id, now - DEDUPE_MS] });
    const inserted = await t.execute({
      sql: "INSERT INTO executor_events (id, name, payload, received_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING RETURNING seq",
      args: [event.id, event.name, JSON.stringify(event), now],
    });
    const seqRow = inserted.rows[0];
    if (!seqRow) continue;
    const seq = Number(seqRow.seq);

    for (const fn of registry.byEvent.get(event.name) ?? []) {
      if (!triggerMatches(fn, event)) continue;
      const runId = await createRun(t, { fn, event, runId: ulid(), now, watermark: seq });
      if (runId) woken.push(runId);
    }
    woken.push(...(await resolveWaits(t, event, seq)));
    await applyCancels(t, event, registry, now);
  }
  return { ids, woken };
}

async function resolveWaits(t: Tx, event: StoredEvent, seq: number): Promise<string[]> {
  const waits = await rows<{ run_id: string; hashed_id: string; expression: string | null; trigger: string; watermark: number }>(
    t,
    `SELECT p.run_id, p.hashed_id, p.expression, r.event AS trigger, r.watermark FROM executor_pending p
       JOIN executor_runs r ON r.id = p.run_id
      WHERE p.kind = 'wait' AND p.event_name = ? AND r.status NOT IN ${TERMINAL_SQL}`,
    [event.name],
  );
  const woken: string[] = [];
  for (const w of waits) {
    if (w.expression && !celMatches(w.expression, { event: JSON.parse(w.trigger), async: event })) continue;
    await resolvePending(t, { runId: w.run_id, hashedId: w.hashed_id, result: event, watermark: seq });
    waitStats.byIncomingEvent++;
    woken.push(w.run_id);
  }
  return woken;
}

/**
 * Record a result for a pending op of a parked (or running) run and make it runnable. A race-mode op cancels its
 * siblings: the function continues after the first of them.
 */
export async function resolvePending(
  t: Tx,
  { runId, hashedId, result, watermark }: { runId: string; hashedId: string; result: unknown; watermark?: number },
): Promise<boolean> {
  const del = await t.execute({
    sql: "DELETE FROM executor_pending WHERE run_id = ? AND hashed_id = ? RETURNING race",
    args: [runId, hashedId],
  });
  if (del.rows.length === 0) return false;
  // The result goes into the stack before any race losers below: the SDK resolves memoized steps in stack order.
  await t.execute({
    sql: "INSERT INTO executor_steps (run_id, hashed_id, result, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    args: [runId, hashedId, JSON.stringify(result ?? null), Date.now()],
  });
  if (Number(del.rows[0]!.race) === 1) {
    // The race is won: timers and waits that lost it resolve as if they had timed out (null), a losing invoke with
    // an error, so the SDK sees state for every op and can return. Losing step.run calls still run to completion.
    const losers = await t.execute({
      sql: "DELETE FROM executor_pending WHERE run_id = ? AND race = 1 AND kind <> 'step' RETURNING hashed_id, kind",
      args: [runId],
    });
    for (const loser of losers.rows) {
      const lost = loser.kind === "invoke" ? { error: { name: "Error", message: "Lost a parallel race" } } : null;
      await t.execute({
        sql: "INSERT INTO executor_steps (run_id, hashed_id, result, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        args: [runId, String(loser.hashed_id), JSON.stringify(lost), Date.now()],
      });
    }
  }
  await t.execute({
    sql: `UPDATE executor_runs SET next_at = 0, watermark = max(watermark, ?),
            status = CASE WHEN status IN ('waiting','sleeping') THEN 'queued' ELSE status END
          WHERE id = ?`,
    args: [watermark ?? 0, runId],
  });
  return true;
}

/** Called when a wait is stored: the first event since the run's watermark that matches resolves it at once. */
export async function resolveWaitFromHistory(
  t: Tx,
  { runId, hashedId, eventName, expression, trigger, watermark }: {
    runId: string;
    hashedId: string;
    eventName: string;
    expression: string | null;
    trigger: unknown;
    watermark: number;
  },
): Promise<boolean> {
  // `match` compiles to `event.<path> == async.<path>`: narrow the candidates in SQL before evaluating CEL.
  const simple = expression ? /^\s*event\.([A-Za-z_][\w.]*)\s*==\s*async\.([A-Za-z_][\w.]*)\s*$/.exec(expression) : null;
  const triggerValue = simple ? pathValue(trigger, simple[1]!) : undefined;
  const narrow = simple && (typeof triggerValue === "string" || typeof triggerValue === "number");
  const candidates = await rows<{ seq: number; payload: string }>(
    t,
    narrow
      ? "SELECT seq, payload FROM executor_events WHERE name = ? AND seq > ? AND json_extract(payload, ?) = ? ORDER BY seq"
      : "SELECT seq, payload FROM executor_events WHERE name = ? AND seq > ? ORDER BY seq",
    narrow ? [eventName, watermark, `$.${simple![2]}`, triggerValue as string | number] : [eventName, watermark],
  );
  for (const c of candidates) {
    const event = JSON.parse(c.payload) as StoredEvent;
    if (expression && !celMatches(expression, { event: trigger, async: event })) continue;
    waitStats.fromHistory++;
    return resolvePending(t, { runId, hashedId, result: event, watermark: Number(c.seq) });
  }
  return false;
}

async function applyCancels(t: Tx, event: StoredEvent, registry: Registry, now: number): Promise<void> {
  for (const fn of registry.cancelsByEvent.get(event.name) ?? []) {
    for (const cancel of fn.config.cancel ?? []) {
      if (cancel.event !== event.name) continue;
      const runs = await rows<{ id: string; event: string }>(
        t,
        `SELECT id, event FROM executor_runs WHERE fn_id = ? AND status NOT IN ${TERMINAL_SQL}`,
        [fn.id],
      );
      for (const run of runs) {
        if (cancel.if && !celMatches(cancel.if, { event: JSON.parse(run.event), async: event })) continue;
        await cancelRunInTx(t, run.id, now);
      }
    }
  }
}

export async function cancelRunInTx(t: Tx, runId: string, now: number): Promise<void> {
  await t.execute({
    sql: `UPDATE executor_runs SET status = 'cancelled', ended_at = ?, lease_owner = NULL, lease_until = 0
          WHERE id = ? AND status NOT IN ${TERMINAL_SQL}`,
    args: [now, runId],
  });
  await t.execute({ sql: "DELETE FROM executor_pending WHERE run_id = ?", args: [runId] });
}

function pathValue(value: unknown, path: string): unknown {
  let current = value;
  for (const key of path.split(".")) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
