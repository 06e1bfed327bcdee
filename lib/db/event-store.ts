/**
 * The event store: a run's events appended (with the projection updated by the pure reducer in the same transaction),
 * replayed, imported from a log, and looked up by the durable step that wrote them. Run listings and cursors are in
 * lib/db/queries/runs.ts.
 */
import { and, asc, eq, gt, sql, type SQL } from "drizzle-orm";
import { getClient, getDb, getNative, write, writeGrouped, writeGroupedNative, type Tx } from "@/lib/db";
import type { NativeConnection } from "@/lib/db/statements";
import { STEP_KEY_INDEX_CONDITION, TYPE_INDEX_CONDITION, workflowEvents, workflowRuns, type TypeIndexedEvent } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import { COLUMN_KEYS, rowToState, stateToRow } from "@/lib/db/run-projection";
import { newId } from "@/lib/ids";
import { redactDeep } from "@/lib/redact";
import {
  apply,
  IllegalTransitionError,
  TERMINAL_STATUSES,
  replayEvents,
  type NewRunEvent,
  type RunEvent,
  type RunState,
  type RunStatus,
  type StoredRunEvent,
} from "@/lib/workflow";

export { rowToState, stateToRow };

type RunRow = typeof workflowRuns.$inferSelect;
type EventRow = typeof workflowEvents.$inferSelect;

function rowToEvent(row: EventRow): StoredRunEvent {
  return {
    id: row.id,
    runId: row.workflowRunId,
    sequence: row.sequence,
    type: row.type,
    payload: row.payload,
    timestamp: row.timestamp.getTime(),
  } as StoredRunEvent;
}


/**
 * The projection of each run as this process last committed it, so an append need not read the run row first. Only a
 * hint: every append's UPDATE is guarded by the sequence it expects, and a miss (another process appended, a rebuild
 * replaced the run) re-reads the row inside the same transaction. States are never mutated (the reducer is pure).
 */
const globalForRuns = globalThis as unknown as { __gatehouseRunStates?: Map<string, RunState> };
const committedStates = (globalForRuns.__gatehouseRunStates ??= new Map<string, RunState>());
/** Appends inside a transaction that has not committed yet: later appends in the same transaction build on them. */
const pendingStates = new WeakMap<Tx, Map<string, RunState>>();
const MAX_CACHED_RUNS = 5_000;

function rememberCommitted(state: RunState) {
  const current = committedStates.get(state.id);
  if (current && current.lastSequence >= state.lastSequence) return;
  committedStates.delete(state.id);
  committedStates.set(state.id, state);
  if (committedStates.size > MAX_CACHED_RUNS) committedStates.delete(committedStates.keys().next().value!);
}

/** Forget what this process knows of a run's projection (it was replaced or deleted by other means). */
export function forgetRunState(runId: string) {
  committedStates.delete(runId);
}

async function readState(tx: Tx, runId: string): Promise<RunState> {
  const [row] = await tx.select().from(workflowRuns).where(eq(workflowRuns.id, runId)).limit(1);
  if (!row) {
    committedStates.delete(runId);
    throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  }
  return rowToState(row);
}

/**
 * Append events to a run inside an open transaction: each gets the next sequence number and the projection is updated.
 * Throws AppError conflict:run for an event that is illegal in the run's current state (nothing is written).
 * Two statements in the common case: the run's guarded UPDATE (which also takes SQLite's write lock, so nothing can
 * append in between) and one INSERT of the new events.
 */
export async function appendEventsTx(
  tx: Tx,
  runId: string,
  events: NewRunEvent[],
  options: AppendOptions & { timestamp?: number } = {},
): Promise<{ state: RunState; events: StoredRunEvent[]; duplicate?: boolean }> {
  let pending = pendingStates.get(tx);
  if (!pending) pendingStates.set(tx, (pending = new Map()));
  const known = pending.get(runId) ?? committedStates.get(runId);
  const remembered = !pending.has(runId) && known !== undefined;
  let start = known ?? (await readState(tx, runId));
  if (options.stepKey) {
    // A durable step that crashed after writing re-runs: its events are already there, so write nothing again.
    const existing = await findStepEvents(tx, runId, options.stepKey);
    if (existing.length > 0) return { state: known ? await readState(tx, runId) : start, events: existing, duplicate: true };
  }
  for (let attempt = 0; ; attempt++) {
    const reduced = attempt === 0 && remembered ? tryReduce(start, runId, events, options) : reduce(start, runId, events, options);
    if (reduced === null) {
      // Refused on a remembered projection, which may be stale (appended since by a transaction of write(), or another
      // process): read the row (this transaction holds the write lock) and decide on it.
      committedStates.delete(runId);
      start = await readState(tx, runId);
      continue;
    }
    const { state, stored } = reduced;
    const { id: _id, ...changes } = stateToRow(state);
    // Guarded by the sequence we started from: if anything appended since, this matches no row.
    const updated = await tx
      .update(workflowRuns)
      .set(changes)
      .where(and(eq(workflowRuns.id, runId), eq(workflowRuns.lastSequence, start.lastSequence)))
      .returning({ id: workflowRuns.id });
    if (updated.length !== 1) {
      // A remembered projection was stale: read the row (this transaction now holds the write lock) and start again.
      if (attempt === 0 && known) {
        committedStates.delete(runId);
        start = await readState(tx, runId);
        continue;
      }
      throw new ConcurrentAppendError(runId);
    }
    if (stored.length > 0) {
      await tx.insert(workflowEvents).values(
        stored.map((e) => ({
          id: e.id,
          workflowRunId: runId,
          type: e.type,
          payload: e.payload as Record<string, unknown>,
          timestamp: new Date(e.timestamp),
          sequence: e.sequence,
          stepKey: options.stepKey ?? null,
        })),
      );
    }
    // Committed with the caller's transaction, unseen here: the remembered projection is no longer the run's (an append
    // through appendEvents remembers its own after the commit).
    committedStates.delete(runId);
    pending.set(runId, state);
    return { state, events: stored };
  }
}

/**
 * What an append may be told. `stepKey`: the durable step writing (its events are written once; a re-run finds them).
 * `ended`: the error for an append to a run that has ended (a run step's own, lib/runs/steps/context.ts), thrown
 * before the reducer would refuse it as an illegal transition; a step whose events are already stored still gets them.
 */
export type AppendOptions = { stepKey?: string; ended?: (status: RunStatus) => Error };

/** An append with `ended` to a run that has ended is refused with that error (checked on the state the append builds on). */
function refuseIfEnded(start: RunState, options: AppendOptions): void {
  if (options.ended && TERMINAL_STATUSES.has(start.status)) throw options.ended(start.status);
}

/** refuseIfEnded, then the reducer. */
function reduce(start: RunState, runId: string, events: NewRunEvent[], options: AppendOptions & { timestamp?: number }) {
  refuseIfEnded(start, options);
  return reduceEvents(start, runId, events, options);
}

/** reduce, or null where it refuses (the caller reads the run's row and decides again). */
function tryReduce(start: RunState, runId: string, events: NewRunEvent[], options: AppendOptions & { timestamp?: number }) {
  try {
    return reduce(start, runId, events, options);
  } catch {
    return null;
  }
}

/** The reducer over new events, with redaction and ids: no I/O. Throws conflict:run for an illegal transition. */
function reduceEvents(start: RunState, runId: string, events: NewRunEvent[], options: { timestamp?: number; stepKey?: string }) {
  let state = start;
  const stored: StoredRunEvent[] = [];
  for (const input of events) {
    const sequence = state.lastSequence + 1;
    // Every event passes the redaction filter on its way into the log: a secret in model or command output never lands.
    const redacted = redactDeep(input.payload);
    const payload = options.stepKey ? { ...redacted, stepKey: options.stepKey } : redacted;
    const event = { ...input, payload, timestamp: options.timestamp ?? Date.now() } as RunEvent;
    try {
      state = apply(state, event, { runId, sequence });
    } catch (error) {
      if (error instanceof IllegalTransitionError) {
        throw new AppError("conflict:run", error.message, { cause: error });
      }
      throw error;
    }
    stored.push({ ...event, id: newId("evt"), runId, sequence } as StoredRunEvent);
  }
  return { state, stored };
}

/** The events a durable step (by its key) already wrote, oldest first. */
export async function findStepEvents(tx: Tx, runId: string, stepKey: string): Promise<StoredRunEvent[]> {
  const rows = await tx
    .select()
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), sql`${workflowEvents.stepKey} = ${stepKey} AND ${sql.raw(STEP_KEY_INDEX_CONDITION)}`))
    .orderBy(asc(workflowEvents.sequence));
  return rows.map(rowToEvent);
}

/**
 * A run's events of these types, stated so that SQLite may use the partial (run, type) index: the types must be among
 * TYPE_INDEXED_EVENTS (the compiler checks), and the index's own condition is repeated word for word, since SQLite uses
 * a partial index only for a query that states its condition. `column`: the type column as the query names it (an
 * alias in a raw subquery), else workflow_events.type.
 */
export function eventTypeIn(types: readonly TypeIndexedEvent[], column?: SQL): SQL {
  const col = column ?? sql`${workflowEvents.type}`;
  // Unqualified, "type" names the innermost workflow_events of the query (the index's own wording).
  return sql`(${col} IN (${sql.join(
    types.map((t) => sql`${t}`),
    sql`, `,
  )}) AND ${sql.raw(TYPE_INDEX_CONDITION)})`;
}

class ConcurrentAppendError extends Error {
  constructor(runId: string) {
    super(`Run ${runId} changed while appending`);
    this.name = "ConcurrentAppendError";
  }
}

function isRetryableWriteConflict(error: unknown): boolean {
  if (error instanceof ConcurrentAppendError) return true;
  const text = String((error as { message?: string })?.message ?? "") + String((error as { code?: string })?.code ?? "");
  return /SQLITE_BUSY|UNIQUE constraint failed: workflow_events/.test(text);
}

// ---------------------------------------------------------------------------------------------------------------------
// The append hot path on prepared statements (lib/db/statements.ts): the same reads and writes as appendEventsTx, with
// SQL texts fixed here once instead of built by Drizzle on every call. Column lists and encodings mirror schema.ts
// (json columns: JSON text; timestamp_ms columns: epoch ms).

export const APPEND_SQL = {
  readRun: `SELECT id, project_id, user_id, config, status, current_stage, created_at, started_at, paused_at, resumed_at,
              completed_at, original_request, clarification_count, branch, state, last_sequence, updated_at
            FROM workflow_runs WHERE id = ?`,
  stepEvents: `SELECT id, workflow_run_id, type, payload, timestamp, sequence, step_key FROM workflow_events
               WHERE workflow_run_id = ? AND step_key = ? AND ${STEP_KEY_INDEX_CONDITION} ORDER BY sequence`,
  insertEvent: `INSERT INTO workflow_events (id, workflow_run_id, type, payload, timestamp, sequence, step_key) VALUES (?, ?, ?, ?, ?, ?, ?)`,
} as const;

type NativeRunRow = {
  id: string;
  project_id: string;
  user_id: string;
  config: string;
  status: string;
  current_stage: string | null;
  created_at: number;
  started_at: number | null;
  paused_at: number | null;
  resumed_at: number | null;
  completed_at: number | null;
  original_request: string;
  clarification_count: number;
  branch: string | null;
  state: string;
  last_sequence: number;
  updated_at: number;
};
type NativeEventRow = { id: string; workflow_run_id: string; type: string; payload: string; timestamp: number; sequence: number; step_key: string | null };

const dateOrNull = (ms: number | null) => (ms === null ? null : new Date(ms));

function readStateNative(w: NativeConnection, runId: string): RunState {
  const [r] = w.execute<NativeRunRow>(APPEND_SQL.readRun, [runId]).rows;
  if (!r) {
    committedStates.delete(runId);
    throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  }
  return rowToState({
    id: r.id,
    projectId: r.project_id,
    userId: r.user_id,
    config: JSON.parse(r.config) as Record<string, unknown>,
    status: r.status,
    currentStage: r.current_stage,
    createdAt: new Date(r.created_at),
    startedAt: dateOrNull(r.started_at),
    pausedAt: dateOrNull(r.paused_at),
    resumedAt: dateOrNull(r.resumed_at),
    completedAt: dateOrNull(r.completed_at),
    originalRequest: r.original_request,
    clarificationCount: r.clarification_count,
    branch: r.branch,
    state: JSON.parse(r.state) as Record<string, unknown>,
    lastSequence: r.last_sequence,
    updatedAt: new Date(r.updated_at),
  });
}

/** The projection's columns, in stateArgs' order. */
const STATE_COLUMNS = [
  "project_id",
  "user_id",
  "config",
  "status",
  "current_stage",
  "created_at",
  "started_at",
  "paused_at",
  "resumed_at",
  "completed_at",
  "original_request",
  "clarification_count",
  "branch",
  "state",
  "last_sequence",
  "updated_at",
] as const;

/** Encoded columns of a projection this process read or wrote, so the next append need not encode it again. */
const encodedStates = new WeakMap<RunState, (string | number | null)[]>();

function encodedState(state: RunState): (string | number | null)[] {
  let args = encodedStates.get(state);
  if (!args) encodedStates.set(state, (args = stateArgs(state)));
  return args;
}

const LAST_SEQUENCE_AT = STATE_COLUMNS.indexOf("last_sequence");
const UPDATED_AT_AT = STATE_COLUMNS.indexOf("updated_at");

/**
 * The encoded columns of `state`, the projection an append made from `start`. Most events (artifacts, task progress,
 * tool calls) change nothing but the sequence and the time: then every other field is the very same value as in
 * `start`, and its encoding is `start`'s, without spreading and serializing the whole state again.
 */
function encodedNext(start: RunState, state: RunState, before: (string | number | null)[]): (string | number | null)[] {
  const cached = encodedStates.get(state);
  if (cached) return cached;
  const keys = Object.keys(state);
  let same = keys.length === Object.keys(start).length;
  for (let i = 0; same && i < keys.length; i++) {
    const key = keys[i] as keyof RunState;
    if (key !== "lastSequence" && key !== "updatedAt" && state[key] !== start[key]) same = false;
  }
  if (!same) return encodedState(state);
  const args = before.slice();
  args[LAST_SEQUENCE_AT] = state.lastSequence;
  args[UPDATED_AT_AT] = state.updatedAt;
  encodedStates.set(state, args);
  return args;
}

/**
 * The guarded UPDATE of the projection, setting only the columns whose value the append changed. Most appends change
 * the state JSON, last_sequence and updated_at only; naming an indexed column (project, user, status, created_at) in
 * SET would make SQLite rewrite its index entries, several more pages in every commit. Guarded by the sequence the
 * append started from (the last argument). The SQL texts vary with the set of changed columns, a handful in practice.
 */
function updateRunStatement(start: RunState, state: RunState, runId: string): { sql: string; args: (string | number | null)[] } {
  const before = encodedState(start);
  const after = encodedNext(start, state, before);
  const set: string[] = [];
  const args: (string | number | null)[] = [];
  after.forEach((value, i) => {
    if (value === before[i] && STATE_COLUMNS[i] !== "last_sequence") return;
    set.push(`${STATE_COLUMNS[i]} = ?`);
    args.push(value);
  });
  return { sql: `UPDATE workflow_runs SET ${set.join(", ")} WHERE id = ? AND last_sequence = ?`, args: [...args, runId, start.lastSequence] };
}

/** A run's config as JSON, encoded once per config object (appends carry the same object from state to state). */
const encodedConfigs = new WeakMap<object, string>();
function configJson(config: RunState["config"]): string {
  let json = encodedConfigs.get(config);
  if (json === undefined) encodedConfigs.set(config, (json = JSON.stringify(config)));
  return json;
}

/** The projection's columns in STATE_COLUMNS' order (what stateToRow gives, encoded as Drizzle encodes it). */
function stateArgs(state: RunState): (string | number | null)[] {
  const rest: Record<string, unknown> = { ...state };
  for (const key of COLUMN_KEYS) delete rest[key];
  return [
    state.projectId,
    state.userId,
    configJson(state.config),
    state.status,
    state.currentStage,
    state.createdAt,
    state.startedAt,
    state.pausedAt,
    state.resumedAt,
    state.completedAt,
    state.originalRequest,
    state.clarificationCount,
    state.branch,
    JSON.stringify(rest),
    state.lastSequence,
    state.updatedAt,
  ];
}

/** Appends of one group transaction not committed yet (writeGroupedNative's `group`): later ones build on them. */
const pendingByGroup = new WeakMap<object, Map<string, RunState>>();

/** appendEventsTx on the native writer, inside writeGroupedNative. */
async function appendEventsNative(
  w: NativeConnection,
  group: object,
  runId: string,
  events: NewRunEvent[],
  options: AppendOptions,
): Promise<{ state: RunState; events: StoredRunEvent[]; duplicate?: boolean }> {
  let pending = pendingByGroup.get(group);
  if (!pending) pendingByGroup.set(group, (pending = new Map()));
  const known = pending.get(runId) ?? committedStates.get(runId);
  const remembered = !pending.has(runId) && known !== undefined;
  let start = known ?? readStateNative(w, runId);
  if (options.stepKey) {
    // A durable step that crashed after writing re-runs: its events are already there, so write nothing again.
    const existing = w.execute<NativeEventRow>(APPEND_SQL.stepEvents, [runId, options.stepKey]).rows.map((r) =>
      rowToEvent({ ...r, workflowRunId: r.workflow_run_id, stepKey: r.step_key, payload: JSON.parse(r.payload) as Record<string, unknown>, timestamp: new Date(r.timestamp) }),
    );
    if (existing.length > 0) return { state: known ? readStateNative(w, runId) : start, events: existing, duplicate: true };
  }
  for (let attempt = 0; ; attempt++) {
    const reduced = attempt === 0 && remembered ? tryReduce(start, runId, events, options) : reduce(start, runId, events, options);
    if (reduced === null) {
      // Refused on a remembered projection, which may be stale: read the row (the write lock is held) and decide on it.
      committedStates.delete(runId);
      start = readStateNative(w, runId);
      continue;
    }
    const { state, stored } = reduced;
    const update = updateRunStatement(start, state, runId);
    const updated = w.execute(update.sql, update.args).rowsAffected;
    if (updated !== 1) {
      // A remembered projection was stale: read the row (this transaction holds the write lock) and start again.
      if (attempt === 0 && known) {
        committedStates.delete(runId);
        start = readStateNative(w, runId);
        continue;
      }
      throw new ConcurrentAppendError(runId);
    }
    const stepKey = options.stepKey ?? null;
    for (const e of stored) w.execute(APPEND_SQL.insertEvent, [e.id, runId, e.type, JSON.stringify(e.payload), e.timestamp, e.sequence, stepKey]);
    pending.set(runId, state);
    return { state, events: stored };
  }
}

/** Append one or more events in their own transaction (retried if another process raced us). */
export async function appendEvents(
  runId: string,
  events: NewRunEvent[],
  options: AppendOptions = {},
): Promise<{ state: RunState; events: StoredRunEvent[]; duplicate?: boolean }> {
  // Group commit: appends from concurrent callers (any runs) share one transaction; one that fails is rolled back
  // alone (to its savepoint on a file database, else by retrying each in its own). Once committed, the projection is
  // remembered for the next append.
  const { value: _nothing, ...appended } = await appendEventsWith(runId, NO_WRITE, events, options);
  return appended;
}

const NO_WRITE = { native: () => undefined, tx: async () => undefined };

/**
 * appendEvents with a write of the caller's that must commit with the events, or not at all (a gate's claim, which
 * exactly one of concurrent deciders wins): `also` runs first, in the same transaction — on the native writer's group
 * commit on a file database (`native`), else in a Drizzle transaction (`tx`; it may run twice, as writeGrouped says) —
 * and what it returns comes back with the append's result. If it throws, nothing of either is written.
 */
export async function appendEventsWith<T>(
  runId: string,
  also: { native: (w: NativeConnection) => T; tx: (tx: Tx) => Promise<T> },
  events: NewRunEvent[],
  options: AppendOptions = {},
): Promise<{ value: T; state: RunState; events: StoredRunEvent[]; duplicate?: boolean }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const native = await getNative();
      const result = native
        ? await writeGroupedNative(native.writer, async (w, group) => {
            const value = also.native(w);
            return { value, ...(await appendEventsNative(w, group, runId, events, options)) };
          })
        : await writeGrouped(async (tx) => {
            const value = await also.tx(tx);
            return { value, ...(await appendEventsTx(tx, runId, events, options)) };
          });
      rememberCommitted(result.state);
      return result;
    } catch (error) {
      committedStates.delete(runId);
      if (attempt < 8 && isRetryableWriteConflict(error)) {
        await new Promise((r) => setTimeout(r, Math.min(200, 5 * 2 ** attempt) * Math.random()));
        continue;
      }
      throw error;
    }
  }
}

export async function appendEvent(runId: string, event: NewRunEvent) {
  const result = await appendEvents(runId, [event]);
  return { state: result.state, event: result.events[0]! };
}

/**
 * Write a whole run from its event log (rebuild from Git): the projection is recomputed by the reducer, never trusted
 * from the file. Replaces any existing copy of the run.
 */
export async function importRun({ runId, events }: { runId: string; events: StoredRunEvent[] | (RunEvent & { sequence: number })[] }) {
  const ordered = [...events].sort((a, b) => a.sequence - b.sequence);
  ordered.forEach((e, i) => {
    if (e.sequence !== i + 1) throw new AppError("bad_request:run", `Run ${runId}: event sequence has a gap at ${i + 1}`);
  });
  const state = replayEvents(runId, ordered);
  if (!state) throw new AppError("bad_request:run", `Run ${runId} has no events`);
  committedStates.delete(runId);
  await write(async (tx) => {
    await tx.delete(workflowRuns).where(eq(workflowRuns.id, runId));
    await tx.insert(workflowRuns).values(stateToRow(state));
    for (const e of ordered) {
      const stepKey = (e.payload as { stepKey?: unknown }).stepKey;
      await tx.insert(workflowEvents).values({
        id: "id" in e && typeof e.id === "string" ? e.id : newId("evt"),
        workflowRunId: runId,
        type: e.type,
        payload: e.payload as Record<string, unknown>,
        timestamp: new Date(e.timestamp),
        sequence: e.sequence,
        stepKey: typeof stepKey === "string" ? stepKey : null,
      });
    }
  });
  return state;
}


// ---------------------------------------------------------------------------------------------------------------------
// Reads

export async function getRunState({ id }: { id: string }): Promise<RunState | null> {
  const db = await getDb();
  const row = await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, id) });
  return row ? rowToState(row) : null;
}

export async function listEvents({
  runId,
  after = 0,
  limit = 500,
}: {
  runId: string;
  after?: number;
  limit?: number;
}): Promise<StoredRunEvent[]> {
  const db = await getDb();
  const rows = await db
    .select()
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), gt(workflowEvents.sequence, after)))
    .orderBy(asc(workflowEvents.sequence))
    .limit(limit);
  return rows.map(rowToEvent);
}

/**
 * A run's events of the given (type-indexed) types, in order, however many other events lie between them: what a check
 * that reads a run's pauses and resumes needs on a long run, where a window of its last N events could miss them.
 */
export async function listEventsOfTypes({ runId, types }: { runId: string; types: readonly TypeIndexedEvent[] }): Promise<StoredRunEvent[]> {
  const db = await getDb();
  const rows = await db
    .select()
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(types)))
    .orderBy(asc(workflowEvents.sequence));
  return rows.map(rowToEvent);
}

/**
 * Rebuild the projection from the events alone. The events come back as one JSON array built by SQLite (one row, one
 * JSON.parse): mapping 10,000 result rows one by one cost more than reducing them.
 */
export async function replay({ runId }: { runId: string }): Promise<RunState | null> {
  const client = await getClient();
  const rs = await client.execute({
    sql: `SELECT json_group_array(json_object('type', type, 'payload', json(payload), 'timestamp', timestamp, 'sequence', sequence))
            FROM (SELECT type, payload, timestamp, sequence FROM workflow_events WHERE workflow_run_id = ? ORDER BY sequence)`,
    args: [runId],
  });
  const events = JSON.parse(String(rs.rows[0]?.[0] ?? "[]")) as (RunEvent & { sequence: number })[];
  return replayEvents(runId, events);
}

