import fs from "node:fs";
import path from "node:path";
import { createClient, type Client, type Transaction } from "@libsql/client";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { getEnv } from "@/lib/env";
import * as schema from "./schema";
import { backfillRepositoryKeys } from "./repository-key";
import { log } from "@/lib/log";
import { Checkpointer, SQLITE_AUTOCHECKPOINT_PAGES } from "./checkpointer";
import { openNative, type NativeConnection, type NativeConnections } from "./statements";
import { databaseAway, noteWriteOutcome } from "./away";
import { watchForeignCommits } from "./commit-watch";

export type Db = LibSQLDatabase<typeof schema>;
/** A transaction handle; has the same query API as Db. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** Connections per client: readers run beside the single writer; more would only hold file handles. */
const POOL_SIZE = 8;

/**
 * `native`: the prepared-statement connections of a file database (lib/db/statements.ts), opened on first use; null
 * for a remote or in-memory database, whose callers use the client.
 */
type Handle = {
  url: string;
  client: Client;
  db: Db;
  ready: Promise<void>;
  file: string | null;
  native?: NativeConnections | null;
  /** WAL checkpoints on a worker thread (lib/db/checkpointer.ts), started with the native connections. */
  checkpointer?: Checkpointer | null;
};

/** SQLite's busy timeout (ms) for another process holding the write lock. */
const BUSY_TIMEOUT_MS = 5000;

// Cached on globalThis so that Next's hot reload does not open a client per edit.
const globalForDb = globalThis as unknown as {
  __gatehouseDb?: Handle;
  __gatehouseWriteQueue?: Promise<unknown>;
  __gatehouseGroup?: GroupItem[];
  __gatehouseNativeGroup?: NativeGroupItem[];
};

type NativeGroupItem = {
  fn: (writer: NativeConnection, group: object) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
};

type GroupItem = { fn: (tx: Tx) => Promise<unknown>; resolve: (value: unknown) => void; reject: (error: unknown) => void };

export function migrationsFolder(): string {
  return path.join(/*turbopackIgnore: true*/ process.cwd(), "drizzle");
}

/** Open a client for a database URL, with the pragmas Gatehouse relies on for file databases. */
export function openDatabase({ url, authToken }: { url: string; authToken?: string }): Handle {
  let file: string | undefined;
  if (url.startsWith("file:")) {
    const name = url.slice("file:".length).split("?")[0] ?? "";
    if (name && name !== ":memory:") {
      file = path.resolve(/*turbopackIgnore: true*/ name);
      // A directory created here is the owner's alone; the database file exists (0600) before SQLite opens it, and
      // SQLite gives its -wal and -shm files the database file's permissions.
      const created = fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      if (created) fs.chmodSync(path.dirname(file), 0o700);
      fs.closeSync(fs.openSync(file, "a", 0o600));
      restrictFiles(file);
    }
  }
  // `timeout` is SQLite's busy timeout (ms) for another *process* holding the write lock; writers inside this process
  // are serialised by `write()` below and never wait on each other in the native layer.
  const client = createClient({ url, authToken, timeout: BUSY_TIMEOUT_MS, concurrency: POOL_SIZE } as Parameters<typeof createClient>[0]);
  const db = drizzle(client, { schema });
  const ready = (async () => {
    if (url.startsWith("file:")) {
      await client.execute("PRAGMA journal_mode = WAL");
      await primeConnections(client);
    }
    await migrate(db, { migrationsFolder: migrationsFolder() });
    await backfillRepositoryKeys(db);
    if (file) restrictFiles(file);
  })();
  // Avoid an unhandled rejection if nobody awaited `ready` yet; callers of getDb() see the error.
  ready.catch(() => {});
  return { url, client, db, ready, file: file ?? null };
}

/** The database and its WAL/shared-memory files: readable by the owner only (they hold every run's request and output). */
function restrictFiles(file: string) {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      fs.chmodSync(f, 0o600);
    } catch {
      // not created (yet)
    }
  }
}

/** The data directory (database, workspaces, keys, logs) is the owner's alone. */
function restrictDataDir(dir: string) {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o700);
  } catch {
    // read-only or foreign-owned: nothing we can do here; the files themselves are still 0600
  }
}

/**
 * WAL + synchronous=NORMAL: durable across process crashes (kill -9); only an OS crash may lose the last commits.
 * `synchronous` is per connection and libsql's pool opens connections lazily (FULL by default: an fsync per commit), so
 * every connection of the pool is reached once — by holding the others in read transactions — and set.
 */
async function primeConnections(client: Client): Promise<void> {
  const held: Transaction[] = [];
  try {
    for (let i = 0; i < POOL_SIZE; i++) {
      await client.execute("PRAGMA synchronous = NORMAL");
      held.push(await client.transaction("read"));
    }
  } catch {
    // TRANSACTION_ACTIVE: every connection of the pool is primed.
  } finally {
    for (const t of held) t.close();
  }
}

/**
 * The app's database, migrated. The first call opens it and applies pending migrations, so a newcomer never runs a
 * separate step.
 */
export async function getDb(): Promise<Db> {
  const handle = getHandle();
  await handle.ready;
  return handle.db;
}

export async function getClient(): Promise<Client> {
  const handle = getHandle();
  await handle.ready;
  return handle.client;
}

/** The prepared-statement connections of the app's database (null when it is not a local file). */
export async function getNative(): Promise<NativeConnections | null> {
  const handle = getHandle();
  await handle.ready;
  if (handle.native === undefined) {
    handle.native = handle.file ? openNative({ file: handle.file, timeoutMs: BUSY_TIMEOUT_MS }) : null;
    if (handle.native && handle.file) handle.checkpointer = startCheckpointer(handle.file, handle.native.writer);
  }
  return handle.native;
}

/**
 * Checkpoints leave the writer's COMMITs for a worker thread; if the worker cannot start, or fails later, the writer
 * keeps (or gets back) SQLite's automatic checkpoint.
 */
function startCheckpointer(file: string, writer: NativeConnection): Checkpointer | null {
  let checkpointer: Checkpointer;
  try {
    checkpointer = new Checkpointer({ file, timeoutMs: BUSY_TIMEOUT_MS }, (reason) => {
      writer.afterCommit = undefined;
      if (writer.db.open) writer.exec(`PRAGMA wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
      log.warn("WAL checkpoints are back on the writer's commits (the checkpoint worker stopped)", { reason });
    });
  } catch (error) {
    log.warn("WAL checkpoints stay on the writer's commits (no checkpoint worker)", { reason: error instanceof Error ? error.message : String(error) });
    return null;
  }
  writer.exec("PRAGMA wal_autocheckpoint = 0");
  writer.afterCommit = () => checkpointer.committed();
  return checkpointer;
}

/**
 * Call `onCommit` soon after another process commits to the app's database file (./commit-watch.ts). Returns the stop
 * function, or null for a database that is not a local file (there, only polling finds other processes' writes).
 */
export async function onForeignCommit(onCommit: () => void): Promise<(() => void) | null> {
  const native = await getNative();
  const file = getHandle().file;
  if (!native || !file) return null;
  return watchForeignCommits(file, native.writer, onCommit);
}

/** The background checkpointer of the app's database (null for a remote or in-memory one, or if it failed to start). */
export async function getCheckpointer(): Promise<Checkpointer | null> {
  await getNative();
  return getHandle().checkpointer ?? null;
}

function closeHandle(handle: Handle): void {
  handle.checkpointer?.close();
  handle.checkpointer = null;
  handle.native?.writer.close();
  handle.native?.reader.close();
  handle.native = null;
  handle.client.close();
}

function getHandle(): Handle {
  const env = getEnv();
  const existing = globalForDb.__gatehouseDb;
  if (existing && existing.url === env.databaseUrl) return existing;
  if (existing) closeHandle(existing);
  restrictDataDir(env.dataDir);
  const handle = openDatabase({ url: env.databaseUrl, authToken: env.DATABASE_AUTH_TOKEN });
  globalForDb.__gatehouseDb = handle;
  return handle;
}

/** Close the cached client (tests, shutdown). */
export function closeDb(): void {
  if (globalForDb.__gatehouseDb) closeHandle(globalForDb.__gatehouseDb);
  globalForDb.__gatehouseDb = undefined;
}

/**
 * Run a write transaction (BEGIN IMMEDIATE). All writes of this process go through one queue: SQLite has one writer,
 * and a second in-process writer waiting natively on the lock would block the event loop the first one needs to finish.
 */
export async function write<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
  const db = await getDb();
  return serialize(() => transact(db, fn));
}

/**
 * A transaction on the client's pooled connections, once the write lock is free: the native writer takes it and gives it
 * back first. A pooled connection whose BEGIN IMMEDIATE is refused (another process holds the lock past the busy
 * timeout) keeps that statement active until the garbage collector finalizes it, and every COMMIT on that connection
 * fails meanwhile ("cannot commit transaction - SQL statements in progress"): the database seems away long after it is
 * back. The native writer's statements are prepared once and reset on their next run, so a refusal there leaves nothing.
 */
async function transact<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const native = await getNative();
  if (native) {
    native.writer.exec("BEGIN IMMEDIATE");
    native.writer.exec("ROLLBACK");
  }
  return db.transaction(fn);
}

/** Serialise an arbitrary write-side operation with the process's write queue (used by write() and the executor). */
export function serialize<T>(fn: () => Promise<T>): Promise<T> {
  globalForDb.__gatehouseDb?.checkpointer?.wrote();
  const previous = globalForDb.__gatehouseWriteQueue ?? Promise.resolve();
  const tracked = trackedWrite(fn);
  const run = previous.then(tracked, tracked);
  globalForDb.__gatehouseWriteQueue = run.catch(ignoreFailure);
  return run;
}

/**
 * `fn`, reporting its outcome: it tells whether the database takes writes, and since when it has not (./away.ts).
 * Made here rather than as a named closure in serialize(): under tsx every named closure costs a `__name` call per write.
 */
function trackedWrite<T>(fn: () => Promise<T>): () => Promise<T> {
  return async () => {
    const startedAt = Date.now();
    try {
      const value = await fn();
      noteWriteOutcome(startedAt);
      return value;
    } catch (error) {
      noteWriteOutcome(startedAt, error);
      throw error;
    }
  };
}

const ignoreFailure = () => undefined;

/**
 * Group commit through the same write queue: writes that arrive while the queue is busy are run together in one
 * transaction when their turn comes, in arrival order (so two writes to one run keep their order, and each sees the
 * ones before it). If any of them throws, the group is rolled back and each write runs again in a transaction of its
 * own, so only the failing one is rejected and nothing of it is written. `fn` may therefore run twice: it must only
 * touch the database.
 */
export async function writeGrouped<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
  const db = await getDb();
  return new Promise<T>((resolve, reject) => {
    const item: GroupItem = { fn, resolve: resolve as (value: unknown) => void, reject };
    const open = globalForDb.__gatehouseGroup;
    if (open) {
      open.push(item);
      return;
    }
    const group: GroupItem[] = [item];
    globalForDb.__gatehouseGroup = group;
    serialize(async () => {
      // From here on, new writes form the next group (queued behind this one).
      if (globalForDb.__gatehouseGroup === group) globalForDb.__gatehouseGroup = undefined;
      if (group.length > 1) {
        try {
          const values = await transact(db, async (tx) => {
            const out: unknown[] = [];
            for (const g of group) out.push(await g.fn(tx));
            return out;
          });
          group.forEach((g, i) => g.resolve(values[i]));
          return;
        } catch {
          // Fall through: one at a time.
        }
      }
      // One at a time: if none went through and the database refused them, the queue hears of it (./away.ts).
      let refused: unknown;
      let accepted = false;
      for (const g of group) {
        try {
          g.resolve(await transact(db, (tx) => g.fn(tx)));
          accepted = true;
        } catch (error) {
          if (databaseAway(error)) refused ??= error;
          g.reject(error);
        }
      }
      if (refused !== undefined && !accepted) throw refused;
    }).catch(() => undefined);
  });
}

/**
 * Group commit on the native writer (lib/db/statements.ts), for hot appends: writes that arrive while the write queue is
 * busy run together, in arrival order, in one BEGIN IMMEDIATE transaction when their turn comes, each inside a savepoint
 * of its own. A write that throws is rolled back to its savepoint (nothing of it stays) and only it is rejected; the
 * others commit. Every caller is resolved only after the one COMMIT, so each write is durable when its promise settles.
 * `group` is one object per transaction: writes of one group can share uncommitted state keyed by it.
 */
const GATHER_PROBE_EVERY = 16;
const nativeGather = { active: false, sinceProbe: 0 };

export function writeGroupedNative<T>(writer: NativeConnection, fn: (writer: NativeConnection, group: object) => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const item: NativeGroupItem = { fn, resolve: resolve as (value: unknown) => void, reject };
    const open = globalForDb.__gatehouseNativeGroup;
    if (open) {
      open.push(item);
      return;
    }
    const group: NativeGroupItem[] = [item];
    globalForDb.__gatehouseNativeGroup = group;
    // Gathering: in one process the writes of concurrent runs are chained promises, and a transaction of prepared
    // statements finishes before another run gets to ask for one, so groups would stay single. Starting a group one
    // macrotask later lets the other runs' writes join it (one COMMIT for many). That is done while the last gathered
    // group had company, and otherwise only as a probe every GATHER_PROBE_EVERY groups, so a lone writer rarely waits.
    const gathered = nativeGather.active || ++nativeGather.sinceProbe >= GATHER_PROBE_EVERY;
    if (gathered) {
      nativeGather.sinceProbe = 0;
      setImmediate(() => {
        if (globalForDb.__gatehouseNativeGroup === group) nativeGather.active = group.length > 1;
        startNativeGroup(writer, group);
      });
    } else startNativeGroup(writer, group);
  });
}

/** Run a gathered group in the write queue (a function of its own, not a closure per write: see serialize()). */
function startNativeGroup(writer: NativeConnection, group: NativeGroupItem[]): void {
  void serialize(async () => {
    // From here on, new writes form the next group (queued behind this one).
    if (globalForDb.__gatehouseNativeGroup === group) globalForDb.__gatehouseNativeGroup = undefined;
    const token = {};
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    try {
      writer.exec("BEGIN IMMEDIATE");
      // A write alone in its group needs no savepoint: if it fails, the whole transaction is rolled back instead.
      const alone = group.length === 1;
      for (const g of group) {
        if (!alone) writer.exec("SAVEPOINT grouped_write");
        try {
          const value = await g.fn(writer, token);
          if (!alone) writer.exec("RELEASE grouped_write");
          outcomes.push({ ok: true, value });
        } catch (error) {
          if (!alone) {
            writer.exec("ROLLBACK TO grouped_write");
            writer.exec("RELEASE grouped_write");
          }
          outcomes.push({ ok: false, error });
        }
      }
      if (!alone || outcomes[0]!.ok) {
        writer.exec("COMMIT");
        writer.afterCommit?.();
      } else if (writer.inTransaction) writer.exec("ROLLBACK");
    } catch (error) {
      // BEGIN (busy past the timeout), a savepoint or the COMMIT failed: nothing of the group is written; the queue
      // hears of it (./away.ts).
      if (writer.inTransaction) writer.exec("ROLLBACK");
      for (const g of group) g.reject(error);
      throw error;
    }
    group.forEach((g, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) g.resolve(outcome.value);
      else g.reject(outcome.error);
    });
  }).catch(ignoreFailure);
}

export { schema };
