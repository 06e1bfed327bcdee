import fs from "node:fs";
import path from "node:path";
import { createClient, type Client, type Transaction } from "@libsql/client";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { getEnv } from "@/lib/env";
import * as schema from "./schema";
import { backfillRepositoryKeys } from "./repository-key";

export type Db = LibSQLDatabase<typeof schema>;
/** A transaction handle; has the same query API as Db. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** Connections per client: readers run beside the single writer; more would only hold file handles. */
const POOL_SIZE = 8;

type Handle = { url: string; client: Client; db: Db; ready: Promise<void> };

// Cached on globalThis so that Next's hot reload does not open a client per edit.
const globalForDb = globalThis as unknown as { __gatehouseDb?: Handle; __gatehouseWriteQueue?: Promise<unknown> };

export function migrationsFolder(): string {
  return path.join(/*turbopackIgnore: true*/ process.cwd(), "drizzle");
}

/** Open a client for a database URL, with the pragmas Gatehouse relies on for file databases. */
export function openDatabase({ url, authToken }: { url: string; authToken?: string }): Handle {
  if (url.startsWith("file:")) {
    const file = url.slice("file:".length).split("?")[0] ?? "";
    if (file && file !== ":memory:") fs.mkdirSync(path.dirname(path.resolve(/*turbopackIgnore: true*/ file)), { recursive: true });
  }
  // `timeout` is SQLite's busy timeout (ms) for another *process* holding the write lock; writers inside this process
  // are serialised by `write()` below and never wait on each other in the native layer.
  const client = createClient({ url, authToken, timeout: 5000, concurrency: POOL_SIZE } as Parameters<typeof createClient>[0]);
  const db = drizzle(client, { schema });
  const ready = (async () => {
    if (url.startsWith("file:")) {
      await client.execute("PRAGMA journal_mode = WAL");
      await primeConnections(client);
    }
    await migrate(db, { migrationsFolder: migrationsFolder() });
    await backfillRepositoryKeys(db);
  })();
  // Avoid an unhandled rejection if nobody awaited `ready` yet; callers of getDb() see the error.
  ready.catch(() => {});
  return { url, client, db, ready };
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

function getHandle(): Handle {
  const env = getEnv();
  const existing = globalForDb.__gatehouseDb;
  if (existing && existing.url === env.databaseUrl) return existing;
  if (existing) existing.client.close();
  const handle = openDatabase({ url: env.databaseUrl, authToken: env.DATABASE_AUTH_TOKEN });
  globalForDb.__gatehouseDb = handle;
  return handle;
}

/** Close the cached client (tests, shutdown). */
export function closeDb(): void {
  globalForDb.__gatehouseDb?.client.close();
  globalForDb.__gatehouseDb = undefined;
}

/**
 * Run a write transaction (BEGIN IMMEDIATE). All writes of this process go through one queue: SQLite has one writer,
 * and a second in-process writer waiting natively on the lock would block the event loop the first one needs to finish.
 */
export async function write<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
  const db = await getDb();
  return serialize(() => db.transaction(fn));
}

/** Serialise an arbitrary write-side operation with the process's write queue (used by write() and the executor). */
export function serialize<T>(fn: () => Promise<T>): Promise<T> {
  const previous = globalForDb.__gatehouseWriteQueue ?? Promise.resolve();
  const run = previous.then(fn, fn);
  globalForDb.__gatehouseWriteQueue = run.catch(() => undefined);
  return run;
}

export { schema };
