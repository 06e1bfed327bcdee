/*
 * The database away: another process holding SQLite's write lock past the busy timeout, or the file unreachable. All
 * of this process's writes wait in one queue (./index.ts serialize), each for the whole busy timeout, so while the
 * database is away a write fails only once every write queued before it has: the failure of a run's write can come
 * long after the database stopped taking writes. The queue therefore remembers when the first write that was refused
 * began, until a write goes through; that is when the outage began.
 */

const DATABASE_ERRORS = /SQLITE_BUSY|SQLITE_LOCKED|database is locked|SQLITE_CANTOPEN|unable to open database file|SQLITE_IOERR|disk I\/O error/i;

/** Whether an error says the database refused or could not take the work (not that the work itself was wrong). */
export function databaseAway(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e: unknown = error; e && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    const text = e instanceof Error ? `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}` : String(e);
    if (DATABASE_ERRORS.test(text)) return true;
  }
  return false;
}

const globalForAway = globalThis as unknown as { __gatehouseWritesRefusedSince?: number | null };

/** A queued write that began at `startedAt` went through (`error` undefined) or failed. */
export function noteWriteOutcome(startedAt: number, error?: unknown): void {
  if (error === undefined) globalForAway.__gatehouseWritesRefusedSince = null;
  else if (databaseAway(error)) globalForAway.__gatehouseWritesRefusedSince ??= startedAt;
}

/** When the first of this process's writes that the database has refused since its last accepted one began; null if none. */
export function writesRefusedSince(): number | null {
  return globalForAway.__gatehouseWritesRefusedSince ?? null;
}
