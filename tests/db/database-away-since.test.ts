import { afterEach, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { write } from "@/lib/db";
import { writesRefusedSince } from "@/lib/db/away";
import { databaseAway, databaseOutageOf, noteDatabaseAway, recordDatabaseOutage } from "@/lib/runs/steps/database";
import { lockDatabase } from "./lock";

/*
 * The database away, at the level of the process's write queue (lib/db): what a refused write leaves behind, and
 * since when a run's outage counts.
 */

let release: (() => Promise<void>) | null = null;
afterEach(async () => {
  await release?.();
  release = null;
});

const touch = () => write((tx) => tx.run(sql`UPDATE workflow_runs SET updated_at = updated_at WHERE 0`));

it("once the database is back, writes go through again: a refused write leaves no connection that keeps failing", { timeout: 120_000 }, async () => {
  await touch();
  const lock = await lockDatabase();
  release = lock.release;
  const refused = await touch().catch((error: unknown) => error);
  expect(databaseAway(refused)).toBe(true);
  await lock.release();
  release = null;
  // Each of them on a connection of the pool: none fails with "cannot commit transaction - SQL statements in progress".
  for (let i = 0; i < 4; i++) await expect(touch()).resolves.toBeDefined();
  expect(writesRefusedSince()).toBeNull();
});

it("a run whose write waited behind others for the lock is away since the first refused write began, not since its own failed", { timeout: 120_000 }, async () => {
  // All of a process's writes wait for the lock in one queue, each for the whole busy timeout: a run's write queued
  // behind others fails many timeouts after the database stopped taking writes. Dated from that failure, a 45 s outage
  // could read as under the 30 s that makes it a recorded pause (database-away.test.ts's 45 s test, 1 run in 4).
  await touch();
  expect(writesRefusedSince()).toBeNull();
  const lock = await lockDatabase();
  release = lock.release;
  const failedAt: number[] = [];
  // Three writes queued at once (other runs', the executor's), then this run's: refused one after another.
  const queued = [0, 1, 2].map(() => touch().catch((error: unknown) => (failedAt.push(Date.now()), error)));
  const mine = await touch().catch((error: unknown) => error);
  expect((await Promise.all(queued)).every(databaseAway)).toBe(true);
  expect(databaseAway(mine)).toBe(true);

  noteDatabaseAway("run_queued_behind", mine);
  const since = databaseOutageOf("run_queued_behind")!.since;
  // Away since before the first refusal came back, i.e. since the database stopped taking writes.
  expect(since).toBeLessThan(failedAt[0]!);
  expect(since).toBe(writesRefusedSince());

  await lock.release();
  release = null;
  // Back: a write goes through, and this outage (shorter than the patience) is forgotten, nothing recorded.
  await recordDatabaseOutage("run_queued_behind", "probe");
  expect(writesRefusedSince()).toBeNull();
  expect(databaseOutageOf("run_queued_behind")).toBeNull();
});
