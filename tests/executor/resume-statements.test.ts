import { Inngest } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getNative } from "@/lib/db";
import { sendEvents } from "@/lib/executor";
import { WAIT_SQL } from "@/lib/executor/events";
import { LEASED_COLUMNS, query } from "@/lib/executor/store";
import { listRuns, startApp, waitFor, waitForRuns } from "./harness";

/*
 * What a resume costs the database: the event that resolves a keyed wait (`match`) is stored, the wait resolved and the
 * run leased for this process's executor (the hand-off) in one transaction. Its statements are counted on the native
 * writer, where every write of the executor runs.
 */

let app: Awaited<ReturnType<typeof startApp>>;

beforeAll(async () => {
  app = await startApp(
    (origin) => {
      const inngest = new Inngest({ id: "resume-cost", isDev: true, baseUrl: origin });
      const gate = inngest.createFunction({ id: "gate", retries: 0, triggers: [{ event: "cost/start" }] }, async ({ event, step }) => {
        await step.run("before", () => 1);
        const got = await step.waitForEvent("approve", { event: "cost/approve", match: "data.k", timeout: "1h" });
        await step.run("after", () => 2);
        return { k: event.data.k, got: got?.data.k ?? null };
      });
      return { inngest, functions: [gate] };
    },
    // No poll while the statements are counted.
    { pollMs: 600_000, leaseMs: 30_000 },
  );
});
afterAll(async () => {
  await app?.close();
});

/** The SQL texts the native writer runs while `fn` runs. */
async function statementsOf(fn: () => Promise<unknown>): Promise<string[]> {
  const native = await getNative();
  if (!native) throw new Error("the executor tests run on a file database");
  const writer = native.writer;
  const seen: string[] = [];
  const { execute, exec } = writer;
  writer.execute = ((sql: string, args?: never) => {
    // The executor's look for other processes' commits (lib/db/commit-watch.ts) and its reads between transactions
    // (store.ts query, on the writer while no transaction is open) may run meanwhile; they are no part of a write.
    if (sql !== "PRAGMA data_version" && writer.inTransaction) seen.push(sql.replace(/\s+/g, " ").trim());
    return execute.call(writer, sql, args);
  }) as typeof writer.execute;
  writer.exec = (sql: string) => {
    seen.push(sql);
    exec.call(writer, sql);
  };
  try {
    await fn();
  } finally {
    writer.execute = execute;
    writer.exec = exec;
  }
  return seen;
}

describe("a resume's statements", () => {
  it("a matched wait is stored, resolved and handed off in 10 statements: one UPDATE wakes the run, its function is not read again", async () => {
    await sendEvents({ name: "cost/start", data: { k: "a" } });
    const [run] = await listRuns("gate");
    await waitFor(async () => (await query<{ status: string }>("SELECT status FROM executor_runs WHERE id = ?", [run!.id]))[0]?.status === "waiting", {
      what: "the run to park at its wait",
    });

    const statements = await statementsOf(() => sendEvents({ name: "cost/approve", data: { k: "a" } }));
    const updatesOfRun = statements.filter((s) => s.startsWith("UPDATE executor_runs"));
    // The wake-up (watermark, state size, next_at, status) and the hand-off's lease: two, not three.
    expect(updatesOfRun).toHaveLength(2);
    expect(statements.filter((s) => s.startsWith("SELECT fn_id FROM executor_runs"))).toEqual([]);
    // BEGIN, the event, the wait lookups (first key path and whether unkeyed waits exist, keyed waits, next path), the
    // pending op, the entry, the wake-up, the lease, COMMIT.
    expect(statements).toHaveLength(10);
    expect(statements.filter((s) => s.includes("match_path IS NULL"))).toHaveLength(1);
    expect(statements[0]).toBe("BEGIN IMMEDIATE");
    expect(statements.at(-1)).toBe("COMMIT");
    // No write reads rows back but the lease's (its seq is the event's rowid; the wait's `race` comes with the wait's row).
    expect(statements.filter((s) => s.includes("RETURNING"))).toEqual([expect.stringMatching(/^UPDATE executor_runs SET lease_owner/)]);
    // The lease reads back only the columns the drive reads of the run, not the whole row.
    expect(statements.find((s) => s.startsWith("UPDATE executor_runs SET lease_owner"))).toMatch(new RegExp(`RETURNING ${LEASED_COLUMNS.join(", ")}$`));

    const [done] = await waitForRuns("gate");
    // The wait's entry is numbered by the event that resolved it.
    const [approve] = await query<{ seq: number }>("SELECT seq FROM executor_events WHERE name = 'cost/approve'");
    const entries = await query<{ event_seq: number; result: string }>("SELECT event_seq, result FROM executor_steps WHERE run_id = ? ORDER BY seq", [run!.id]);
    expect(entries.filter((e) => JSON.parse(e.result)?.name === "cost/approve").map((e) => e.event_seq)).toEqual([approve!.seq]);
    expect(done).toMatchObject({ status: "completed", output: { k: "a", got: "a" } });
  });

  it("an event nobody waits for looks for waits with one read", async () => {
    const statements = await statementsOf(() => sendEvents({ name: "cost/nobody", data: {} }));
    expect(statements).toEqual([
      "BEGIN IMMEDIATE",
      expect.stringMatching(/^INSERT INTO executor_events/),
      WAIT_SQL.first.replace(/\s+/g, " ").trim(),
      "COMMIT",
    ]);
  });

  it("that read seeks the wait index for both of its answers", async () => {
    const plan = await query<{ detail: string }>(`EXPLAIN QUERY PLAN ${WAIT_SQL.first}`, ["ev"]);
    const details = plan.map((p) => p.detail);
    expect(details.filter((d) => /executor_pending_wait_idx \(event_name=\? AND match_path>\?\)/.test(d))).toHaveLength(1);
    expect(details.filter((d) => /executor_pending_wait_idx \(event_name=\? AND match_path=\?\)/.test(d))).toHaveLength(1);
    expect(details.some((d) => /SCAN executor_pending/.test(d))).toBe(false);
  });
});
