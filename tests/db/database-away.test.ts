import { afterAll, beforeAll, expect, it } from "vitest";
import { and, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { Executor } from "@/lib/executor";
import { ownAppTarget } from "@/inngest/embedded";
import type { SessionUser } from "@/lib/auth/guard";
import { expectRunConsistent, fileBlock, git, launch, newProject, until, waitForStatus, waitForWorkflow } from "../workflow/harness";
import { scriptedImplementer, startModelServer } from "../workflow/model-server";
import { slugify } from "@/lib/ai/demo/instructions";
import { lockDatabase } from "./lock";

/*
 * The database goes away in the middle of a run: another process holds SQLite's write lock for longer than the busy
 * timeout, so every write of the run's steps and of the executor itself is refused (SQLITE_BUSY) for a while, then
 * the lock is released. The executor runs with its production retry backoff (1 s, 2 s, 4 s …), as the server does.
 */

let executor: Executor;
let user: SessionUser;
const logged: string[] = [];
beforeAll(async () => {
  executor = new Executor({
    apps: [ownAppTarget({ inProcess: true })],
    pollMs: 50,
    leaseMs: 5_000,
    log: (level, message, extra) => {
      if (level !== "info") logged.push(`${level}: ${message} ${extra instanceof Error ? extra.message : JSON.stringify(extra ?? "")}`);
    },
  });
  await executor.start();
  const owner = await ensureLocalOwner();
  user = { id: owner.id, name: owner.name, via: "admin-token" };
});
afterAll(async () => {
  await executor.stop();
});

it("locked for 15 s mid-implementation: refused writes are retried, the run resumes and completes; no partial rows, no event lost or doubled", { timeout: 240_000 }, async () => {
  const { project, repo } = await newProject(user);
  const request = ["Database away", "", ...[0, 1, 2].map((i) => fileBlock(`src/f${i}.txt`, `content ${i}`))].join("\n");
  const run = await launch(user, project.id, request, { trustMode: { planning: "auto" } });
  await until(async () => (await listEvents({ runId: run.id, limit: 1000 })).some((e) => e.type === "TASK_STARTED"), "a task to start");
  const lock = await lockDatabase();
  const lockedAt = Date.now();
  await new Promise((r) => setTimeout(r, 15_000));
  const before = await listEvents({ runId: run.id, limit: 1000 });
  await lock.release();
  // Nothing was written while the lock was held (reads went on: WAL).
  expect(before.filter((e) => e.timestamp > lockedAt + 1_000)).toEqual([]);

  expect((await waitForStatus(run.id, ["completed", "failed", "paused"], 120_000)).status).toBe("completed");
  expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
  // The refusals happened and were retried (the lock was real).
  expect(logged.join("\n")).toMatch(/locked|SQLITE_BUSY/i);

  const events = await expectRunConsistent(run.id);
  // The demo plan has a task per file block and a closing one.
  expect(events.filter((e) => e.type === "TASK_COMPLETED")).toHaveLength(4);
  expect(events.filter((e) => e.type === "RUN_COMPLETED")).toHaveLength(1);
  const subjects = git(repo, "log", "--format=%s", `main..${run.branch}`).split("\n");
  const tasks = subjects.filter((s) => s.startsWith("Task "));
  expect(new Set(tasks).size).toBe(tasks.length);
  const db = await getDb();
  const calls = await db.select().from(modelCalls).where(and(eq(modelCalls.workflowRunId, run.id), eq(modelCalls.status, "ok")));
  const steps = calls.map((c) => c.stepKey!.replace(/#\d+$/, ""));
  expect(new Set(steps).size).toBe(steps.length);
});

it("locked past the step's retries: the run waits, records a pause saying the database was away (when, how long) once it is back, resumes by itself and completes; nothing lost or doubled", { timeout: 300_000 }, async () => {
  const { project, repo } = await newProject(user);
  const title = "Database away long";
  // The implementer's first model call is held until the lock is taken: the step in flight then writes into the
  // locked database (its events, its model call) and fails on it.
  const model = await startModelServer();
  let answer!: () => void;
  const locked = new Promise<void>((resolve) => (answer = resolve));
  const implement = scriptedImplementer(`docs/requests/${slugify(title)}.md`);
  model.respond(async (body, n) => {
    if (n === 1) await locked;
    return implement(body);
  });
  try {
    const run = await launch(user, project.id, title, {
      trustMode: { planning: "auto" },
      modelRouting: { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" },
    });
    await until(async () => model.requests >= 1, "the implementer's model call", 120_000);
    const lock = await lockDatabase();
    const lockedAt = Date.now();
    answer();
    await new Promise((r) => setTimeout(r, 45_000));
    const during = await getRunState({ id: run.id });
    await lock.release();
    const releasedAt = Date.now();
    // While it was away nothing could be written, the pause included: the run still reads as it was.
    expect(during?.status).toBe("running");

    expect((await waitForStatus(run.id, ["completed", "failed"], 180_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    const events = await expectRunConsistent(run.id);
    const paused = events.filter((e) => e.type === "RUN_PAUSED");
    expect(paused).toHaveLength(1);
    const pause = paused[0]!;
    expect(pause.payload).toMatchObject({ reason: "database", message: expect.stringMatching(/database could not be written from \d\d:\d\d:\d\d UTC for about \d+ s/) });
    // Recorded once the database was back, then resumed by Gatehouse, not by a person.
    expect(pause.timestamp).toBeGreaterThanOrEqual(releasedAt);
    const seconds = Number(/for about (\d+) s/.exec((pause.payload as { message: string }).message)![1]);
    expect(seconds).toBeGreaterThanOrEqual(30);
    expect(seconds).toBeLessThanOrEqual(Math.ceil((releasedAt - lockedAt) / 1000) + 5);
    const resumed = events.filter((e) => e.type === "RUN_RESUMED");
    expect(resumed).toHaveLength(1);
    expect(resumed[0]!.payload).toMatchObject({ by: "gatehouse" });
    expect(resumed[0]!.sequence).toBe(pause.sequence + 1);

    // Nothing doubled: each task once, one commit per task, one model call per step, one completion.
    const completed = events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId);
    expect(completed.length).toBeGreaterThan(0);
    expect(new Set(completed).size).toBe(completed.length);
    expect(events.filter((e) => e.type === "RUN_COMPLETED")).toHaveLength(1);
    const tasks = git(repo, "log", "--format=%s", `main..${run.branch}`).split("\n").filter((s) => s.startsWith("Task "));
    expect(new Set(tasks).size).toBe(tasks.length);
    const db = await getDb();
    const calls = await db.select().from(modelCalls).where(and(eq(modelCalls.workflowRunId, run.id), eq(modelCalls.status, "ok")));
    const steps = calls.map((c) => c.stepKey!.replace(/#\d+$/, ""));
    expect(new Set(steps).size).toBe(steps.length);
  } finally {
    await model.close();
  }
});
