import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { migrationsFolder } from "@/lib/db";

/*
 * Migrations that rebuild a table must keep every row written before them.
 * - 0010 rebuilds workflow_events keyed by (run, sequence), without the id index, with partial type and step-key
 *   indexes; 0011 rebuilds it again as a WITHOUT ROWID table (the key is the table).
 * - 0016 rebuilds executor_steps with its `seq` a plain rowid instead of AUTOINCREMENT (no sqlite_sequence write per
 *   step).
 */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-migration-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A copy of the migrations folder whose journal stops before `tag`. */
function migrationsBefore(tag: string): string {
  const older = path.join(tmp, `drizzle-before-${tag}`);
  fs.cpSync(migrationsFolder(), older, { recursive: true });
  const journalFile = path.join(older, "meta", "_journal.json");
  const journal = JSON.parse(fs.readFileSync(journalFile, "utf8")) as { entries: Array<{ tag: string }> };
  const at = journal.entries.findIndex((e) => e.tag === tag);
  expect(at).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, at);
  fs.writeFileSync(journalFile, JSON.stringify(journal));
  return older;
}

/** A row for `table` with a value in every column that needs one (the test only reads the events back). */
async function insertMinimal(client: Client, table: string, values: Record<string, string | number>) {
  const columns = (await client.execute(`SELECT name, type, "notnull" AS nn, dflt_value AS d FROM pragma_table_info('${table}')`)).rows;
  const row: Record<string, string | number> = {};
  for (const c of columns) {
    const name = String(c.name);
    if (name in values) row[name] = values[name]!;
    else if (Number(c.nn) === 1 && c.d === null) row[name] = String(c.type).toLowerCase().includes("int") ? 0 : "{}";
  }
  const names = Object.keys(row);
  await client.execute({ sql: `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`, args: names.map((n) => row[n]!) });
}

describe("migrations 0010 and 0011: the event log keyed by (run, sequence), WITHOUT ROWID", () => {
  it("keeps every event written before it (ids, types, payloads, order), and the log refuses a taken sequence after it", async () => {
    const file = path.join(tmp, "events.db");
    const client = createClient({ url: `file:${file}` });
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore("0010_events_keyed_by_run_sequence") });
    await client.execute("PRAGMA foreign_keys = OFF");
    await insertMinimal(client, "users", { id: "usr_1" });
    await insertMinimal(client, "projects", { id: "prj_1", owner_id: "usr_1" });
    await insertMinimal(client, "workflow_runs", { id: "run_1", project_id: "prj_1", user_id: "usr_1", status: "running", last_sequence: 3 });
    const before = [
      ["evt_a", "RUN_CREATED", JSON.stringify({ request: "x" }), 1],
      ["evt_b", "STAGE_STARTED", JSON.stringify({ stage: "planning", stepKey: "planning:start" }), 2],
      ["evt_c", "ARTIFACT_CREATED", JSON.stringify({ type: "note", path: "a.md" }), 3],
    ] as const;
    for (const [id, type, payload, sequence] of before) {
      await client.execute({
        sql: "INSERT INTO workflow_events (id, workflow_run_id, type, payload, timestamp, sequence) VALUES (?, 'run_1', ?, ?, ?, ?)",
        args: [id, type, payload, 1_700_000_000_000 + sequence, sequence],
      });
    }
    await client.execute("PRAGMA foreign_keys = ON");

    await migrate(drizzle(client), { migrationsFolder: migrationsFolder() });
    const after = (await client.execute("SELECT id, type, payload, sequence FROM workflow_events WHERE workflow_run_id = 'run_1' ORDER BY sequence")).rows;
    expect(after.map((r) => [r.id, r.type, r.payload, r.sequence])).toEqual(before.map((e) => [...e]));
    const indexes = (await client.execute("SELECT name FROM pragma_index_list('workflow_events')")).rows.map((r) => String(r.name)).sort();
    expect(indexes).toEqual(["sqlite_autoindex_workflow_events_1", "workflow_events_run_step_key_idx", "workflow_events_run_type_idx"]);
    // The step key moved to a column of its own, taken from the payload (where it stays).
    const keys = (await client.execute("SELECT sequence, step_key FROM workflow_events WHERE workflow_run_id = 'run_1' ORDER BY sequence")).rows;
    expect(keys.map((r) => [r.sequence, r.step_key])).toEqual([[1, null], [2, "planning:start"], [3, null]]);
    // The key is the table: no rowid b-tree beside it.
    const [table] = (await client.execute("SELECT wr FROM pragma_table_list('workflow_events')")).rows;
    expect(Number(table!.wr)).toBe(1);
    await expect(client.execute("SELECT rowid FROM workflow_events")).rejects.toThrow(/no such column: rowid/);
    await expect(
      client.execute("INSERT INTO workflow_events (id, workflow_run_id, type, payload, timestamp, sequence) VALUES ('evt_d', 'run_1', 'ARTIFACT_CREATED', '{}', 0, 3)"),
    ).rejects.toThrow(/UNIQUE constraint failed/);
    // The foreign key to the run survived the rebuild: deleting the run deletes its events.
    await client.execute("DELETE FROM workflow_runs WHERE id = 'run_1'");
    expect((await client.execute("SELECT count(*) AS n FROM workflow_events")).rows[0]!.n).toBe(0);
    client.close();
  });
});

describe("migration 0016: executor_steps' seq a plain rowid, not AUTOINCREMENT", () => {
  it("keeps every step result (seq, order, columns) and the one-result-per-step index; new steps go after them", async () => {
    const file = path.join(tmp, "steps.db");
    const client = createClient({ url: `file:${file}` });
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore("0016_executor_steps_rowid") });
    const before = [
      [1, "run_a", "h1", JSON.stringify({ data: 1 }), 0, 100],
      [2, "run_b", "h1", JSON.stringify({ data: "two" }), 4, 101],
      [7, "run_a", "h2", "null", 5, 102],
    ] as const;
    for (const row of before) {
      await client.execute({ sql: "INSERT INTO executor_steps (seq, run_id, hashed_id, result, event_seq, created_at) VALUES (?, ?, ?, ?, ?, ?)", args: [...row] });
    }
    expect((await client.execute("SELECT seq FROM sqlite_sequence WHERE name = 'executor_steps'")).rows[0]!.seq).toBe(7);

    await migrate(drizzle(client), { migrationsFolder: migrationsFolder() });
    const after = (await client.execute("SELECT seq, run_id, hashed_id, result, event_seq, created_at FROM executor_steps ORDER BY seq")).rows;
    expect(after.map((r) => [r.seq, r.run_id, r.hashed_id, r.result, r.event_seq, r.created_at])).toEqual(before.map((r) => [...r]));
    const [table] = (await client.execute("SELECT sql FROM sqlite_master WHERE name = 'executor_steps'")).rows;
    expect(String(table!.sql)).not.toMatch(/AUTOINCREMENT/i);
    expect((await client.execute("SELECT count(*) AS n FROM sqlite_sequence WHERE name = 'executor_steps'")).rows[0]!.n).toBe(0);
    // A run's state is read in seq order: a new result goes after every stored one.
    await client.execute("INSERT INTO executor_steps (run_id, hashed_id, result, created_at) VALUES ('run_a', 'h3', '1', 103)");
    const order = (await client.execute("SELECT hashed_id FROM executor_steps WHERE run_id = 'run_a' ORDER BY seq")).rows.map((r) => r.hashed_id);
    expect(order).toEqual(["h1", "h2", "h3"]);
    await expect(client.execute("INSERT INTO executor_steps (run_id, hashed_id, result, created_at) VALUES ('run_a', 'h1', '2', 104)")).rejects.toThrow(
      /UNIQUE constraint failed/,
    );
    client.close();
  });
});
