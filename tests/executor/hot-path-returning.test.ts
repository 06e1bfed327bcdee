import { describe, expect, it } from "vitest";
import { getNative } from "@/lib/db";
import type { NativeConnection } from "@/lib/db/statements";
import { handleCheckpointRequest, sqlTextLength } from "@/lib/executor/checkpoint";
import { query, tx } from "@/lib/executor/store";

/*
 * The executor's hot paths on the native binding: a write with RETURNING takes the binding's row-reading path, about
 * 45 µs more per statement than the same write without it, and a read on the reader connection after one of this
 * process's commits reads its pages again (SQLite drops a connection's page cache when another connection commits).
 * A checkpoint (one per step) writes without RETURNING; reads between transactions run on the writer.
 */

const post = (runId: string, body: unknown) =>
  handleCheckpointRequest(new Request(`http://x/v1/checkpoint/${runId}/async`, { method: "POST", body: JSON.stringify(body) }));

async function runningRun(id: string) {
  await tx((t) =>
    t.execute({
      sql: `INSERT INTO executor_runs (id, fn_id, app_url, event, events, status, attempt, lease_owner, lease_until, generation, watermark, created_at)
            VALUES (?, 'app-fn', 'http://app', '{}', '[]', 'running', 0, 'w1', ?, 3, 0, ?)`,
      args: [id, Date.now() + 60_000, Date.now()],
    }),
  );
}

const stepRun = (id: string, data: unknown) => ({ id, op: "StepRun", name: id, data });
const envelope = (runId: string, steps: unknown[]) => ({ run_id: runId, fn_id: "app-fn", qi_id: "w1/3", generation_id: 3, steps });

/** The SQL texts `conn` runs while `fn` runs. */
async function statementsOn(conn: NativeConnection, fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const { execute, exec } = conn;
  conn.execute = ((sql: string, args?: never) => {
    if (sql !== "PRAGMA data_version") seen.push(sql.replace(/\s+/g, " ").trim());
    return execute.call(conn, sql, args);
  }) as typeof conn.execute;
  conn.exec = (sql: string) => {
    seen.push(sql);
    exec.call(conn, sql);
  };
  try {
    await fn();
  } finally {
    conn.execute = execute;
    conn.exec = exec;
  }
  return seen;
}

async function native() {
  const n = await getNative();
  if (!n) throw new Error("the executor tests run on a file database");
  return n;
}

describe("the executor's hot paths on the native binding", () => {
  it("a checkpoint stores its step and passes its fence in four statements, none reading rows back", async () => {
    await runningRun("ret-cp");
    const statements = await statementsOn((await native()).writer, async () => {
      expect((await post("ret-cp", envelope("ret-cp", [stepRun("h1", { ok: true })]))).status).toBe(200);
    });
    expect(statements).toHaveLength(4);
    expect(statements[0]).toBe("BEGIN IMMEDIATE");
    expect(statements[1]).toMatch(/^INSERT INTO executor_steps/);
    expect(statements[2]).toMatch(/^UPDATE executor_runs/);
    expect(statements[3]).toBe("COMMIT");
    expect(statements.filter((s) => /RETURNING/.test(s))).toEqual([]);
  });

  it("the run's state size still counts what SQLite's length() counts of each stored result, a repeated step adding nothing", async () => {
    await runningRun("ret-size");
    const outputs = ["plain", "é and 漢字", "emoji 😀😀 and a lone \ud800 surrogate", { nested: ["\u0000", "\n", "𝄞"] }];
    const res = await post("ret-size", envelope("ret-size", [...outputs.map((o, i) => stepRun(`s${i}`, o)), stepRun("s0", "again")]));
    expect(res.status).toBe(200);
    const [stored] = await query<{ bytes: number; counted: number; n: number }>(
      `SELECT r.state_bytes AS bytes, (SELECT sum(length(result)) FROM executor_steps WHERE run_id = r.id) AS counted,
              (SELECT count(*) FROM executor_steps WHERE run_id = r.id) AS n
         FROM executor_runs r WHERE r.id = 'ret-size'`,
    );
    expect(stored!.n).toBe(outputs.length);
    expect(stored!.bytes).toBe(stored!.counted);
    for (const text of ["", "abc", "😀", "a😀b\ud800c", JSON.stringify({ data: "𝄞 é" })]) {
      const [row] = await query<{ n: number }>("SELECT length(?) AS n", [text]);
      expect(sqlTextLength(text)).toBe(row!.n);
    }
  });

  it("the run state limit still refuses a checkpoint whose dispatch is current (413), and a stale one still gets 409", async () => {
    await runningRun("ret-full");
    await tx((t) => t.execute("UPDATE executor_runs SET state_bytes = 32 * 1024 * 1024 - 5 WHERE id = 'ret-full'"));
    const full = await post("ret-full", envelope("ret-full", [stepRun("h1", "more than five characters")]));
    expect(full.status).toBe(413);
    expect((await full.json()).error).toMatch(/run state limit/);
    await tx((t) => t.execute("UPDATE executor_runs SET generation = 4 WHERE id = 'ret-full'"));
    expect((await post("ret-full", envelope("ret-full", [stepRun("h1", "more than five characters")]))).status).toBe(409);
    expect(await query("SELECT 1 FROM executor_steps WHERE run_id = 'ret-full'")).toHaveLength(0);
  });

  it("a read between transactions runs on the writer; a read while a write transaction is open runs on the reader and sees only what is committed", async () => {
    const { writer, reader } = await native();
    await runningRun("ret-read");
    const sql = "SELECT status FROM executor_runs WHERE id = 'ret-read'";
    const onWriter = await statementsOn(writer, () => query(sql));
    expect(onWriter).toEqual([sql]);

    let inside: string[] = [];
    let seen: unknown;
    await tx(async (t) => {
      await t.execute("UPDATE executor_runs SET status = 'queued' WHERE id = 'ret-read'");
      inside = await statementsOn(reader, async () => {
        seen = await query(sql);
      });
    });
    expect(inside).toEqual([sql]);
    expect(seen).toEqual([{ status: "running" }]);
    expect(await query(sql)).toEqual([{ status: "queued" }]);
  });
});
