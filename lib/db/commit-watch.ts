import fs from "node:fs";
import path from "node:path";
import type { NativeConnection } from "./statements";

/**
 * Commits made by other processes on the same database file, noticed as they happen (no poll): the web server that
 * stored an event (GATEHOUSE_EMBEDDED_WORKER=false) and the worker that drives the run it resumed share only the file.
 *
 * Every commit in WAL mode appends to `<db>-wal`, which the directory's watch (inotify on Linux) reports. That alone
 * would also report this process's own commits, so each report is checked with `PRAGMA data_version` on `conn` (the
 * native writer): SQLite changes it only when another connection has committed. A report can arrive before the other
 * process has published its commit (the WAL frames are written before the WAL index is updated), so a report that
 * finds no change is checked once more RECHECK_MS later; a commit missed by both is still found by the caller's poll.
 */

/** The second look after a report that found no foreign commit yet. */
export const RECHECK_MS = 2;

/** Counters for tests: reports received, and foreign commits found. */
export const commitWatchStats = { reports: 0, found: 0 };

export function watchForeignCommits(file: string, conn: NativeConnection, onCommit: () => void): () => void {
  const wal = `${path.basename(file)}-wal`;
  const version = (): number | null => {
    try {
      const [row] = conn.execute<{ data_version: number }>("PRAGMA data_version").rows;
      return Number(row?.data_version ?? 0);
    } catch {
      return null; // closed, or the database is away: the poll goes on
    }
  };
  let last = version();
  let scheduled = false;
  let recheck: NodeJS.Timeout | undefined;
  let closed = false;
  /** Whether another connection committed since the last look (and if so, tell the caller). */
  const look = (): boolean => {
    if (closed) return false;
    const now = version();
    if (now === null || now === last) return false;
    last = now;
    commitWatchStats.found++;
    onCommit();
    return true;
  };
  const onReport = () => {
    commitWatchStats.reports++;
    if (scheduled || closed) return;
    scheduled = true;
    // One look for a burst of reports (a commit writes several frames).
    setImmediate(() => {
      scheduled = false;
      if (look() || recheck) return;
      recheck = setTimeout(() => {
        recheck = undefined;
        look();
      }, RECHECK_MS);
      recheck.unref();
    });
  };
  let watcher: fs.FSWatcher;
  try {
    watcher = fs.watch(path.dirname(file), { persistent: false }, (_event, name) => {
      if (name === null || name === wal) onReport();
    });
  } catch {
    return () => undefined; // no file watching here (some network file systems): the poll alone finds other commits
  }
  watcher.on("error", () => watcher.close());
  return () => {
    closed = true;
    clearTimeout(recheck);
    watcher.close();
  };
}
