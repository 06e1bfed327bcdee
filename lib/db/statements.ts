import Database from "libsql";

/**
 * Prepared statements on native libSQL connections, for the hot write paths (the executor's per-step commits and the
 * run event log's appends). @libsql/client prepares every statement on every call and probes it with a throwing
 * `raw()`; Drizzle builds the SQL text on every call as well. A profile of a 100-step run put those at about a third of
 * the executor's CPU. Here each SQL text is prepared once per connection and reused.
 *
 * Two connections per database, opened beside the client's pool (lib/db/index.ts): `writer`, for the process's write
 * queue (serialize()) and, while it has no transaction open, the executor's reads (lib/executor/store.ts query: its
 * page cache survives its own commits, the reader's does not), and `reader`, for the other reads. Every call on them is
 * synchronous, so one of each is enough: no two statements of this process ever run on one connection at once, and
 * the writer's open transaction is never seen by a read.
 */

export type SqlValue = string | number | bigint | boolean | null | Date | Uint8Array;
export type SqlArgs = readonly SqlValue[];
export type Row = Record<string, unknown>;
/** `lastInsertRowid`: for a write, the rowid of the connection's latest INSERT (meaningful when `rowsAffected` > 0). */
export type Result<T = Row> = { rows: T[]; rowsAffected: number; lastInsertRowid?: number | bigint };

/** Distinct SQL texts kept prepared per connection (texts with a variable list of `?` come and go). */
const CACHE_LIMIT = 256;

type Statement = Database.Statement;

export class NativeConnection {
  private readonly statements = new Map<string, { stmt: Statement; reader: boolean }>();
  /** Called after each COMMIT of a write group (lib/db writeGroupedNative): the background checkpointer counts them. */
  afterCommit?: () => void;

  constructor(readonly db: Database.Database) {}

  private prepared(sql: string): { stmt: Statement; reader: boolean } {
    let entry = this.statements.get(sql);
    if (!entry) {
      if (this.statements.size >= CACHE_LIMIT) this.statements.clear();
      const stmt = this.db.prepare(sql);
      entry = { stmt, reader: stmt.reader };
      this.statements.set(sql, entry);
    }
    return entry;
  }

  /**
   * Run one statement: the rows it returns (objects by column name), or how many rows it changed and the rowid it
   * inserted. A write with RETURNING takes the row-reading path, which costs this binding about 45 µs more per
   * statement than a write without (tests/executor/hot-path-returning.test.ts keeps the hot paths off it).
   */
  execute<T = Row>(sql: string, args: SqlArgs = []): Result<T> {
    const { stmt, reader } = this.prepared(sql);
    const bound = args.map(toSql);
    if (reader) return { rows: stmt.all(bound) as T[], rowsAffected: 0 };
    const info = stmt.run(bound);
    return { rows: [], rowsAffected: info.changes, lastInsertRowid: info.lastInsertRowid };
  }

  /** Statements without arguments or results (BEGIN, COMMIT, ROLLBACK, SAVEPOINT), prepared once like the rest. */
  exec(sql: string): void {
    this.prepared(sql).stmt.run([]);
  }

  get inTransaction(): boolean {
    return this.db.open && this.db.inTransaction;
  }

  close(): void {
    this.statements.clear();
    try {
      if (this.db.open) this.db.close();
    } catch {
      // already closed
    }
  }
}

/** The values @libsql/client accepts, bound as it binds them (the native layer aborts the process on a boolean). */
function toSql(value: SqlValue): string | number | bigint | null | Uint8Array {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (value instanceof Date) return value.getTime();
  if (value === undefined) throw new TypeError("undefined cannot be bound to an SQL parameter (use null)");
  if (typeof value === "number" && !Number.isFinite(value)) throw new RangeError(`${value} cannot be bound to an SQL parameter`);
  return value;
}

export type NativeConnections = { writer: NativeConnection; reader: NativeConnection };

/**
 * Open the writer and reader for a database file, with the pragmas the client's connections get (WAL is a property of
 * the file and already set; synchronous = NORMAL and the busy timeout are per connection).
 */
export function openNative({ file, timeoutMs }: { file: string; timeoutMs: number }): NativeConnections {
  const open = () => {
    const db = new Database(file, { timeout: timeoutMs });
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
    return new NativeConnection(db);
  };
  return { writer: open(), reader: open() };
}
