import type { Client, InArgs, ResultSet, Transaction } from "@libsql/client";
import { getClient, getNative, serialize, writeGroupedNative } from "@/lib/db";

export { onForeignCommit } from "@/lib/db";
import type { NativeConnection, SqlArgs } from "@/lib/db/statements";

/**
 * Database access for the executor: raw SQL on the app's database (hot paths run once per step). Every write goes
 * through serialize() — the process's single write queue — inside one BEGIN IMMEDIATE transaction, which also orders
 * our writes against other processes on the same file. On a file database the statements run prepared on the native
 * connections (lib/db/statements.ts: each SQL text is prepared once); otherwise on the client.
 */

/**
 * What a statement gives back: its rows (objects by column name) and, for a write without RETURNING, the rows changed
 * and the rowid of the connection's latest INSERT (read it only when the INSERT changed a row).
 */
export type ExecResult = Pick<ResultSet, "rows" | "rowsAffected"> & { lastInsertRowid?: number | bigint };
export type Stmt = string | { sql: string; args?: InArgs };
export type Tx = { execute(stmt: Stmt): Promise<ExecResult> };

/** The app's client (lib/db primes every pooled connection with synchronous = NORMAL). */
async function executorClient(): Promise<Client> {
  return getClient();
}

/**
 * The transaction handle on the native writer (statements prepared once; see lib/db/statements.ts). A class, not an
 * object with an arrow: under tsx every named closure costs a `__name` call per transaction (see checkpoint.ts).
 */
class NativeTx implements Tx {
  constructor(private readonly conn: NativeConnection) {}
  async execute(stmt: Stmt): Promise<ExecResult> {
    const result = typeof stmt === "string" ? this.conn.execute(stmt) : this.conn.execute(stmt.sql, (stmt.args ?? []) as SqlArgs);
    return result as unknown as ExecResult;
  }
}
const onNative = (conn: NativeConnection): Tx => new NativeTx(conn);

/** A result refused by `rollbackIf`, carried out of the group's savepoint (which it rolls back). */
class Refused {
  constructor(readonly result: unknown) {}
}

/**
 * A write transaction. `rollbackIf` lets a caller refuse with a value (no throw) and still leave nothing written.
 * On a file database, writes that arrive while the write queue is busy (other runs' checkpoints, leases, completions)
 * commit together: each in a savepoint of its own, so one that throws or refuses is rolled back alone, and each
 * caller's promise settles only after the shared COMMIT (lib/db writeGroupedNative).
 */
export async function tx<T>(fn: (t: Tx) => Promise<T>, { rollbackIf }: { rollbackIf?: (result: T) => boolean } = {}): Promise<T> {
  const native = await getNative();
  if (native) {
    try {
      return await writeGroupedNative(native.writer, async (writer) => {
        const result = await fn(onNative(writer));
        if (rollbackIf?.(result)) throw new Refused(result);
        return result;
      });
    } catch (err) {
      if (err instanceof Refused) return err.result as T;
      throw err;
    }
  }
  const client = await executorClient();
  return serialize(async () => {
    const t: Transaction = await client.transaction("write");
    try {
      const result = await fn(t);
      if (rollbackIf?.(result)) {
        await t.rollback();
        return result;
      }
      await t.commit();
      return result;
    } catch (err) {
      await t.rollback().catch(() => undefined);
      throw err;
    } finally {
      t.close();
    }
  });
}

/**
 * A read outside a transaction. On a file database it runs on the writer when no write transaction is open on it
 * (every call is synchronous, so none can open meanwhile and nothing uncommitted is seen): SQLite drops a connection's
 * page cache when another connection commits, so the reader, after each of this process's commits, reads its pages
 * again, while the writer's cache still holds what it just wrote (a resumed run's state, read right after the commit
 * that resumed it: p50 113 µs on the writer against 180 µs on the reader, alternating in one referee run). Inside a
 * write transaction (a group waiting on an await) the reader answers (tests/executor/hot-path-returning.test.ts).
 */
export async function query<T = Record<string, unknown>>(sql: string, args: InArgs = []): Promise<T[]> {
  const native = await getNative();
  if (native) return (native.writer.inTransaction ? native.reader : native.writer).execute<T>(sql, args as SqlArgs).rows;
  const client = await executorClient();
  const rs = await client.execute({ sql, args });
  return rs.rows as unknown as T[];
}

export async function rows<T = Record<string, unknown>>(t: Tx, sql: string, args: InArgs = []): Promise<T[]> {
  const rs = await t.execute({ sql, args });
  return rs.rows as unknown as T[];
}

export const TERMINAL = ["completed", "failed", "cancelled"] as const;
export const TERMINAL_SQL = "('completed','failed','cancelled')";

export type RunRow = {
  id: string;
  fn_id: string;
  app_url: string;
  event: string;
  events: string;
  status: string;
  output: string | null;
  error: string | null;
  attempt: number;
  next_at: number;
  lease_owner: string | null;
  lease_until: number;
  watermark: number;
  parallel: number;
  generation: number;
  state_bytes: number;
  concurrency_key: string | null;
  idempotency_key: string | null;
  parent_run_id: string | null;
  parent_step: string | null;
  created_at: number;
  ended_at: number | null;
};

/**
 * What a lease gives the drive of a run (ACQUIRE_SQL's RETURNING): the columns the executor reads of a leased run. A
 * row comes back through the native binding's row-reading path at a cost per column; all 27 of executor_runs cost
 * about 40 µs more than these (tests/executor/hot-path-returning.test.ts).
 */
export const LEASED_COLUMNS = ["id", "fn_id", "app_url", "event", "events", "generation", "parent_run_id", "parent_step", "created_at"] as const;
export type LeasedRun = Pick<RunRow, (typeof LEASED_COLUMNS)[number]>;

export type PendingRow = {
  run_id: string;
  hashed_id: string;
  kind: "step" | "sleep" | "wait" | "invoke";
  op: string;
  attempt: number;
  due_at: number | null;
  event_name: string | null;
  expression: string | null;
  race: number;
  created_at: number;
};
