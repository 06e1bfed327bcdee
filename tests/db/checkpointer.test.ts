import Database from "libsql";
import { afterEach, describe, expect, it } from "vitest";
import { closeDb, getCheckpointer, getNative, writeGroupedNative } from "@/lib/db";
import { CHECKPOINT_EVERY_COMMITS, SQLITE_AUTOCHECKPOINT_PAGES } from "@/lib/db/checkpointer";
import { getEnv } from "@/lib/env";

/*
 * WAL checkpoints run on a worker thread, not inside the native writer's COMMITs (lib/db/checkpointer.ts): the
 * writer commits with automatic checkpoints off, the worker copies the WAL back into the database, and if the worker
 * dies the writer gets SQLite's automatic checkpoint back, so the WAL never grows without bound.
 */

afterEach(() => closeDb());

const pragma = (db: Database.Database, sql: string) => db.prepare(sql).get() as Record<string, number>;

async function writeRows(n: number, from = 0) {
  const native = (await getNative())!;
  native.writer.exec("CREATE TABLE IF NOT EXISTS checkpoint_probe (id INTEGER PRIMARY KEY, v TEXT)");
  for (let i = 0; i < n; i++) {
    await writeGroupedNative(native.writer, async (w) => w.execute("INSERT INTO checkpoint_probe (v) VALUES (?)", [`row ${from + i}`]));
  }
}

async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the background checkpointer", () => {
  it("takes checkpoints off the writer: the writer commits with automatic checkpoints off, and the worker copies the WAL into the database", async () => {
    const native = (await getNative())!;
    const checkpointer = (await getCheckpointer())!;
    expect(checkpointer.active).toBe(true);
    expect(pragma(native.writer.db, "PRAGMA wal_autocheckpoint").wal_autocheckpoint).toBe(0);

    await writeRows(50);
    const result = await checkpointer.checkpoint();
    expect(result).not.toBeNull();
    expect(result!.busy).toBe(0);
    expect(result!.log).toBeGreaterThanOrEqual(50);
    expect(result!.checkpointed).toBe(result!.log);

    // Another connection reading the database file itself (the WAL emptied by a TRUNCATE checkpoint) sees every row.
    const other = new Database(getEnv().databaseUrl.slice("file:".length));
    try {
      expect(pragma(other, "PRAGMA wal_checkpoint(TRUNCATE)")).toMatchObject({ busy: 0, log: 0 });
      expect(pragma(other, "SELECT count(*) AS n FROM checkpoint_probe").n).toBe(pragma(native.reader.db, "SELECT count(*) AS n FROM checkpoint_probe").n);
    } finally {
      other.close();
    }
  });

  it("asks for a checkpoint every CHECKPOINT_EVERY_COMMITS commits of the writer, without being asked", async () => {
    const checkpointer = (await getCheckpointer())!;
    await writeRows(CHECKPOINT_EVERY_COMMITS - 1);
    expect(checkpointer.stats.byCommits).toBe(0);
    await writeRows(1, CHECKPOINT_EVERY_COMMITS - 1);
    expect(checkpointer.stats.byCommits).toBe(1);
    await until(() => checkpointer.stats.completed >= 1);
    // The WAL it found held at least those commits' pages.
    expect(checkpointer.stats.lastLog).toBeGreaterThanOrEqual(CHECKPOINT_EVERY_COMMITS);
    expect(checkpointer.stats.byCall).toBe(0);
  });

  it("checkpoints what was written within a second when the writer goes quiet", async () => {
    const checkpointer = (await getCheckpointer())!;
    await writeRows(3);
    await until(() => checkpointer.stats.byTimer >= 1 && checkpointer.stats.completed >= 1, 5000);
    expect(checkpointer.stats.byCommits + checkpointer.stats.byCall).toBe(0);
  });

  it("if the worker dies, the writer gets SQLite's automatic checkpoint back, and writes go on", async () => {
    const native = (await getNative())!;
    const checkpointer = (await getCheckpointer())!;
    await writeRows(5);
    const count = () => Number(pragma(native.reader.db, "SELECT count(*) AS n FROM checkpoint_probe").n);
    const before = count();
    // A crash of the worker thread, as an uncaught error in it would end it.
    await (checkpointer as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    await until(() => !checkpointer.active);
    expect(checkpointer.stats.failed).toMatch(/checkpoint worker exited/);
    expect(pragma(native.writer.db, "PRAGMA wal_autocheckpoint").wal_autocheckpoint).toBe(SQLITE_AUTOCHECKPOINT_PAGES);
    expect(await checkpointer.checkpoint()).toBeNull();
    await writeRows(5, 5);
    expect(count()).toBe(before + 5);
  });

  it("stops with the database: closeDb ends the worker, and the next database gets a worker of its own", async () => {
    const first = (await getCheckpointer())!;
    closeDb();
    expect(first.active).toBe(false);
    expect(await first.checkpoint()).toBeNull();
    const second = (await getCheckpointer())!;
    expect(second).not.toBe(first);
    expect(second.active).toBe(true);
    await writeRows(3);
    expect((await second.checkpoint())!.checkpointed).toBeGreaterThan(0);
  });
});
