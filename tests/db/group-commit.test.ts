import { beforeAll, describe, expect, it } from "vitest";
import { getNative, writeGrouped } from "@/lib/db";
import { query, tx } from "@/lib/executor/store";
import { createProject } from "@/lib/projects/queries";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvent, appendEvents, getRunState, listEvents, replay } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { workflowEvents } from "@/lib/db/schema";

/** Group commit: concurrent appends share transactions without giving up order, gaplessness or isolation of failures. */

let projectId: string;
let userId: string;

beforeAll(async () => {
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "g", ownerId: userId, repository: { type: "local", path: "/tmp/g" } })).id;
});

/** Occupy the write queue until `release()`: writes issued meanwhile form one group behind it. */
async function holdWriteQueue(): Promise<{ held: Promise<void>; release: () => void }> {
  let release!: () => void;
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const held = writeGrouped(
    () =>
      new Promise<void>((r) => {
        release = r;
        started();
      }),
  );
  await running;
  return { held, release };
}

const newRun = () => createRun({ projectId, userId, request: "group commit", config: {} });
const artifact = (path: string) => ({ type: "ARTIFACT_CREATED" as const, payload: { type: "note", path } });

describe("group commit of appendEvent", () => {
  it("concurrent appends across runs and within a run are gapless, in call order per run, and replay equals the projection", async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, () => newRun()));
    await Promise.all(runs.map((r) => appendEvent(r.id, { type: "RUN_STARTED", payload: {} })));
    // Issued without awaiting: they queue up and commit in groups.
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 40; i++) for (const r of runs) calls.push(appendEvent(r.id, artifact(`${r.id}-${i}.md`)));
    await Promise.all(calls);
    for (const r of runs) {
      const events = await listEvents({ runId: r.id });
      expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 42 }, (_, i) => i + 1));
      // Within a run, the order of the calls is the order of the sequence numbers.
      const paths = events.filter((e) => e.type === "ARTIFACT_CREATED").map((e) => (e.payload as { path: string }).path);
      expect(paths).toEqual(Array.from({ length: 40 }, (_, i) => `${r.id}-${i}.md`));
      const state = await getRunState({ id: r.id });
      expect(state?.lastSequence).toBe(42);
      expect(await replay({ runId: r.id })).toEqual(state);
    }
  });

  it("a failing append in a group is rejected alone: the others of its group commit, nothing of it is written", async () => {
    const a = await newRun();
    const b = await newRun();
    await appendEvent(a.id, { type: "RUN_STARTED", payload: {} });
    await appendEvent(b.id, { type: "RUN_STARTED", payload: {} });
    // Hold the write queue so that everything below lands in one group.
    const { held, release } = await holdWriteQueue();
    const before = appendEvent(a.id, artifact("before.md"));
    // Two events, the second illegal (a second RUN_CREATED): the first must not survive either.
    const failing = appendEvents(b.id, [artifact("half.md"), { type: "RUN_CREATED", payload: {} } as never]);
    const afterB = appendEvent(b.id, artifact("after-b.md"));
    const afterA = appendEvent(a.id, artifact("after-a.md"));
    const failed = failing.then(
      () => null,
      (e: unknown) => e,
    );
    release();
    await held;
    await Promise.all([before, afterB, afterA]);
    expect(await failed).toMatchObject({ code: "conflict:run" });
    const eventsA = await listEvents({ runId: a.id });
    expect(eventsA.map((e) => [e.sequence, (e.payload as { path?: string }).path ?? e.type])).toEqual([
      [1, "RUN_CREATED"],
      [2, "RUN_STARTED"],
      [3, "before.md"],
      [4, "after-a.md"],
    ]);
    const eventsB = await listEvents({ runId: b.id });
    expect(eventsB.map((e) => [e.sequence, (e.payload as { path?: string }).path ?? e.type])).toEqual([
      [1, "RUN_CREATED"],
      [2, "RUN_STARTED"],
      [3, "after-b.md"],
    ]);
    expect((await getRunState({ id: b.id }))?.lastSequence).toBe(3);
    expect(await replay({ runId: b.id })).toEqual(await getRunState({ id: b.id }));
  });

  it("a write that fails inside the database is rolled back alone, the rest of the group commits", async () => {
    const r = await newRun();
    const { held, release } = await holdWriteQueue();
    const ok = appendEvent(r.id, { type: "RUN_STARTED", payload: {} });
    const broken = writeGrouped(async (tx) => {
      // The second insert takes the same (run, sequence), the log's key: refused by the database.
      await tx.insert(workflowEvents).values({ id: "dup-1", workflowRunId: r.id, type: "X", payload: {}, timestamp: new Date(), sequence: 100 });
      await tx.insert(workflowEvents).values({ id: "dup-2", workflowRunId: r.id, type: "X", payload: {}, timestamp: new Date(), sequence: 100 });
    }).then(
      () => null,
      (e: unknown) => e,
    );
    const ok2 = appendEvent(r.id, artifact("x.md"));
    release();
    await Promise.all([held, ok, ok2]);
    expect(await broken).toBeInstanceOf(Error);
    const events = await listEvents({ runId: r.id });
    expect(events.map((e) => e.sequence)).toEqual([1, 2, 3]);
  });
});

describe("group commit on the native writer (the executor's tx)", () => {
  it("writes queued behind a busy queue share one COMMIT; one that throws after writing and one refused are rolled back alone", async () => {
    await tx((t) => t.execute("CREATE TABLE IF NOT EXISTS grouped_probe (k TEXT PRIMARY KEY)"));
    const native = await getNative();
    expect(native).not.toBeNull();
    const writer = native!.writer;
    const exec = writer.exec.bind(writer);
    const commits: string[] = [];
    writer.exec = (sql: string) => {
      if (sql === "COMMIT") commits.push(sql);
      exec(sql);
    };
    try {
      const { held, release } = await holdWriteQueue();
      const insert = (k: string) => ({ sql: "INSERT INTO grouped_probe (k) VALUES (?)", args: [k] });
      const ok1 = tx((t) => t.execute(insert("ok1")));
      const thrown = tx(async (t) => {
        await t.execute(insert("thrown"));
        throw new Error("after writing");
      }).then(
        () => null,
        (e: unknown) => e,
      );
      const refused = tx(
        async (t) => {
          await t.execute(insert("refused"));
          return "no";
        },
        { rollbackIf: (r) => r === "no" },
      );
      const ok2 = tx((t) => t.execute(insert("ok2")));
      release();
      await held;
      await Promise.all([ok1, ok2]);
      expect(await refused).toBe("no");
      expect((await thrown) as Error).toHaveProperty("message", "after writing");
      // The four writes ran in one transaction: one COMMIT for all of them.
      expect(commits).toHaveLength(1);
      const keys = (await query<{ k: string }>("SELECT k FROM grouped_probe ORDER BY k")).map((r) => r.k);
      expect(keys).toEqual(["ok1", "ok2"]);
    } finally {
      writer.exec = exec;
    }
  });

  it("concurrent writers that each await their previous write still share commits, and every write lands", async () => {
    await tx((t) => t.execute("CREATE TABLE IF NOT EXISTS grouped_probe_many (k TEXT PRIMARY KEY)"));
    const writer = (await getNative())!.writer;
    const exec = writer.exec.bind(writer);
    let commits = 0;
    writer.exec = (sql: string) => {
      if (sql === "COMMIT") commits++;
      exec(sql);
    };
    try {
      // 20 writers, 10 writes each, every write awaited before the next and issued from a later macrotask (as a run's
      // checkpoints are: the SDK yields to the event loop between steps).
      await Promise.all(
        Array.from({ length: 20 }, async (_, w) => {
          for (let i = 0; i < 10; i++) {
            await new Promise((r) => setTimeout(r, 0));
            await tx((t) => t.execute({ sql: "INSERT INTO grouped_probe_many (k) VALUES (?)", args: [`${w}-${i}`] }));
          }
        }),
      );
    } finally {
      writer.exec = exec;
    }
    const [row] = await query<{ n: number }>("SELECT count(*) AS n FROM grouped_probe_many");
    expect(row!.n).toBe(200);
    // Without gathering each write would commit alone (200 commits).
    expect(commits).toBeLessThanOrEqual(50);
  });

  it("a write alone in its group that throws leaves nothing written", async () => {
    await tx((t) => t.execute("CREATE TABLE IF NOT EXISTS grouped_probe_alone (k TEXT PRIMARY KEY)"));
    const failed = await tx(async (t) => {
      await t.execute({ sql: "INSERT INTO grouped_probe_alone (k) VALUES (?)", args: ["a"] });
      await t.execute({ sql: "INSERT INTO grouped_probe_alone (k) VALUES (?)", args: ["a"] });
    }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(String(failed)).toMatch(/UNIQUE/);
    expect(await query("SELECT k FROM grouped_probe_alone")).toEqual([]);
    // The writer is usable afterwards (no transaction left open).
    await tx((t) => t.execute({ sql: "INSERT INTO grouped_probe_alone (k) VALUES (?)", args: ["b"] }));
    expect(await query("SELECT k FROM grouped_probe_alone")).toEqual([{ k: "b" }]);
  });
});
