import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "libsql";
import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrationsFolder } from "@/lib/db";
import { WAIT_SQL } from "@/lib/executor/events";
import { ACQUIRE_SQL, DUE_SQL } from "@/lib/executor/executor";

/*
 * executor_runs' indexes (migration 0012): every lease write (acquire, renewal, release) changes lease_until, status
 * and generation, and acquire names gather_key and timeout_at. Only the status index holds every run; the rest are
 * partial, so a lease of a run without concurrency keys, gathering, singleton or timeout writes the row and the status
 * index only. These tests hold the lease write to its page count, and every executor query to the index it relies on.
 */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-run-indexes-"));
const file = path.join(tmp, "runs.db");
let db: Database.Database;

beforeAll(async () => {
  const client = createClient({ url: `file:${file}` });
  await client.execute("PRAGMA journal_mode = WAL");
  await migrate(drizzle(client), { migrationsFolder: migrationsFolder() });
  client.close();
  db = new Database(file);
  db.exec("PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0");
  const insert = db.prepare(
    `INSERT INTO executor_runs (id, fn_id, app_url, event, events, status, next_at, concurrency_key, created_at)
     VALUES (?, ?, 'http://app/api/inngest', '{}', '[]', ?, 0, ?, ?)`,
  );
  db.exec("BEGIN");
  for (let i = 0; i < 400; i++) insert.run([`run_${String(i).padStart(4, "0")}`, `fn_${i % 4}`, i % 3 === 0 ? "waiting" : "queued", i % 10 === 0 ? `key_${i % 7}` : null, 1_000 + i]);
  db.exec("COMMIT");
});
afterAll(() => {
  db.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const plan = (sql: string, args: unknown[]) =>
  (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(args) as Array<{ detail: string }>).map((r) => r.detail);

/** WAL frames (pages) a statement's own transaction writes, averaged over `n` runs. */
function pagesPerCommit(n: number, run: (i: number) => void): number {
  db.prepare("PRAGMA wal_checkpoint(TRUNCATE)").get();
  for (let i = 0; i < n; i++) {
    db.exec("BEGIN IMMEDIATE");
    run(i);
    db.exec("COMMIT");
  }
  const { log } = db.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as { log: number };
  return log / n;
}

describe("executor_runs' indexes", () => {
  it("are partial wherever a lease write would otherwise rewrite them", () => {
    const indexes = Object.fromEntries(
      (db.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'executor_runs' AND sql IS NOT NULL").all() as Array<{ name: string; sql: string }>).map((r) => [r.name, r.sql]),
    );
    expect(Object.keys(indexes).sort()).toEqual([
      "executor_runs_ckey2_idx",
      "executor_runs_ckey_idx",
      "executor_runs_fn_gather_idx",
      "executor_runs_fn_idem_idx",
      "executor_runs_fn_singleton_idx",
      "executor_runs_fn_unstarted_idx",
      "executor_runs_status_next_idx",
      "executor_runs_timeout_idx",
    ]);
    for (const name of ["ckey2", "ckey", "fn_gather", "fn_singleton", "fn_unstarted", "timeout"]) expect(indexes[`executor_runs_${name}_idx`]).toMatch(/ WHERE /);
  });

  it("a lease taken and given back writes the run's row and the status index, not every index holding lease_until", () => {
    const acquire = db.prepare(ACQUIRE_SQL);
    const release = db.prepare("UPDATE executor_runs SET status = 'waiting', next_at = ?, lease_owner = NULL, lease_until = 0 WHERE id = ? AND lease_owner = ?");
    const renew = db.prepare("UPDATE executor_runs SET lease_until = ? WHERE id = ?");
    const now = Date.now();
    // Runs without a concurrency key (i % 10 != 0), as most are.
    const free = (db.prepare("SELECT id FROM executor_runs WHERE concurrency_key IS NULL AND status = 'queued' ORDER BY id LIMIT 60").all() as Array<{ id: string }>).map((r) => r.id);
    const take = (i: number) => expect(acquire.all(["worker", now + 30_000, free[i], now, null, null, 0, null])).toHaveLength(1);
    // The first lease also takes the run out of the unstarted-runs index.
    expect(pagesPerCommit(60, take)).toBeLessThanOrEqual(5);
    expect(pagesPerCommit(60, (i) => renew.run([now + 30_000 + i, free[i]]))).toBeLessThanOrEqual(1);
    expect(pagesPerCommit(60, (i) => release.run([now - 1, free[i], "worker"]))).toBeLessThanOrEqual(3);
    // A resumed run's lease: the row's page and the status index's (its delete and insert land on one or two pages).
    // With lease_until in three whole indexes, and gather_key and timeout_at in two more, it was 8.
    expect(pagesPerCommit(60, take)).toBeLessThanOrEqual(3);
  });

  it("each executor query uses the index meant for it", () => {
    const now = Date.now();
    const acquirePlan = plan(ACQUIRE_SQL, ["w", now, "run_0001", now, 1, 1, 1, null]);
    expect(acquirePlan[0]).toMatch(/SEARCH executor_runs USING INDEX sqlite_autoindex_executor_runs_1 \(id=\?\)/);
    expect(acquirePlan.filter((d) => /SEARCH r2 USING INDEX executor_runs_ckey_idx \(concurrency_key=\? AND lease_until>\?\)/.test(d))).toHaveLength(2);
    expect(acquirePlan.filter((d) => /SEARCH r2 USING INDEX executor_runs_ckey2_idx \(concurrency_key2=\? AND lease_until>\?\)/.test(d))).toHaveLength(2);
    expect(acquirePlan).toContainEqual(expect.stringMatching(/SEARCH r3 USING INDEX executor_runs_fn_unstarted_idx \(fn_id=\? AND concurrency_key=\? AND next_at<\?\)/));
    expect(acquirePlan.join("\n")).not.toMatch(/SCAN/);

    const cases: Array<[string, unknown[], RegExp]> = [
      [DUE_SQL, [now, now, 10], /executor_runs_status_next_idx \(status=\? AND next_at<\?\)/],
      [
        "SELECT id FROM executor_runs WHERE timeout_at IS NOT NULL AND timeout_at <= ? AND status NOT IN ('completed','failed','cancelled') LIMIT 100",
        [now],
        /executor_runs_timeout_idx \(timeout_at>\? AND timeout_at<\?\)/,
      ],
      ["SELECT 1 FROM executor_runs WHERE fn_id = ? AND idempotency_key = ? AND created_at > ? LIMIT 1", ["fn_1", "k", 0], /executor_runs_fn_idem_idx \(fn_id=\? AND idempotency_key=\?\)/],
      ["SELECT id, created_at, events FROM executor_runs WHERE fn_id = ? AND gather_key = ? AND status = 'queued'", ["fn_1", "k"], /executor_runs_fn_gather_idx \(fn_id=\? AND gather_key=\?\)/],
      ["SELECT id FROM executor_runs WHERE fn_id = ? AND singleton_key = ? AND status NOT IN ('completed','failed','cancelled')", ["fn_1", "k"], /executor_runs_fn_singleton_idx \(fn_id=\? AND singleton_key=\?\)/],
      // cancelOn: every live run of a function, through the whole fn_id index.
      ["SELECT id, event, created_at FROM executor_runs WHERE fn_id = ? AND status NOT IN ('completed','failed','cancelled')", ["fn_1"], /executor_runs_fn_idem_idx \(fn_id=\?\)/],
    ];
    for (const [sql, args, index] of cases) expect(plan(sql, args).join("\n")).toMatch(index);
  });

  it("an event finds its waits through the wait index: a seek per key path, a lookup per key, and the unkeyed range", () => {
    expect(plan(WAIT_SQL.nextPath, ["ev", ""]).join("\n")).toMatch(/SEARCH executor_pending USING COVERING INDEX executor_pending_wait_idx \(event_name=\? AND match_path>\?\)/);
    expect(plan(WAIT_SQL.keyed, ["ev", "data.k", '"a"'])[0]).toMatch(/SEARCH p USING INDEX executor_pending_wait_idx \(event_name=\? AND match_path=\? AND match_value=\?\)/);
    expect(plan(WAIT_SQL.unkeyed, ["ev"])[0]).toMatch(/SEARCH p USING INDEX executor_pending_wait_idx \(event_name=\? AND match_path=\?\)/);
    expect(plan("SELECT 1 FROM executor_pending WHERE kind = 'wait' AND event_name = ? LIMIT 1", ["ev"]).join("\n")).toMatch(/executor_pending_wait_idx \(event_name=\?\)/);
  });
});
