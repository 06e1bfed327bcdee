import { performance } from "node:perf_hooks";
import { fmt, printTable, useTempDatabase } from "./lib";

/** Event store: append throughput (1 and 8 writers), replay of a 10,000-event run, and SQLite's raw commit ceiling. */
export async function run() {
  useTempDatabase("db");
  const { getClient, closeDb } = await import("@/lib/db");
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { createProject } = await import("@/lib/db/queries/projects");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { appendEvent, createRun, replay } = await import("@/lib/db/queries/runs");

  const owner = await ensureLocalOwner();
  const project = await createProject({ name: "bench", ownerId: owner.id, repository: { type: "local", path: "/tmp" } });
  const newRun = () => createRun({ projectId: project.id, userId: owner.id, request: "bench", config: {} });
  const artifact = (i: number) => ({ type: "ARTIFACT_CREATED" as const, payload: { type: "note", path: `f${i}.md` } });

  // Raw SQLite commit rate: one INSERT per autocommit transaction on the same file, same pragmas. A ceiling: the best
  // of three rounds, after a warm-up (the first round also pays for the JIT).
  const client = await getClient();
  await client.execute("create table if not exists bench_raw (id integer primary key, v text)");
  const rawN = 2000;
  let t = 0;
  const rawRounds: number[] = [];
  for (let round = 0; round < 4; round++) {
    t = performance.now();
    for (let i = 0; i < rawN; i++) await client.execute({ sql: "insert into bench_raw (v) values (?)", args: [`v${i}`] });
    if (round > 0) rawRounds.push(rawN / ((performance.now() - t) / 1000));
  }
  const rawPerSec = Math.max(...rawRounds);

  // One writer (after a warm-up of 500 appends on another run).
  const warm = await newRun();
  await appendEvent(warm.id, { type: "RUN_STARTED", payload: {} });
  for (let i = 0; i < 500; i++) await appendEvent(warm.id, artifact(i));
  const single = await newRun();
  await appendEvent(single.id, { type: "RUN_STARTED", payload: {} });
  const singleN = 2000;
  t = performance.now();
  for (let i = 0; i < singleN; i++) await appendEvent(single.id, artifact(i));
  const singlePerSec = singleN / ((performance.now() - t) / 1000);

  // Eight concurrent writers, each on its own run.
  const runs = await Promise.all(Array.from({ length: 8 }, () => newRun()));
  for (const r of runs) await appendEvent(r.id, { type: "RUN_STARTED", payload: {} });
  const perWriter = 300;
  t = performance.now();
  await Promise.all(
    runs.map(async (r) => {
      for (let i = 0; i < perWriter; i++) await appendEvent(r.id, artifact(i));
    }),
  );
  const concurrentPerSec = (8 * perWriter) / ((performance.now() - t) / 1000);

  // Many runs appending at once (a busy server): where the one write queue can group commits.
  const many = await Promise.all(Array.from({ length: 64 }, () => newRun()));
  for (const r of many) await appendEvent(r.id, { type: "RUN_STARTED", payload: {} });
  const perMany = 60;
  t = performance.now();
  await Promise.all(
    many.map(async (r) => {
      for (let i = 0; i < perMany; i++) await appendEvent(r.id, artifact(i));
    }),
  );
  const manyPerSec = (64 * perMany) / ((performance.now() - t) / 1000);

  // Replay of a 10,000-event run.
  const big = await newRun();
  await appendEvent(big.id, { type: "RUN_STARTED", payload: {} });
  const { appendEvents } = await import("@/lib/db/queries/runs");
  for (let i = 0; i < 9998; i += 500) {
    await appendEvents(big.id, Array.from({ length: Math.min(500, 9998 - i) }, (_, j) => artifact(i + j)));
  }
  // Replay: the median of 5 (the first also pays for warming the page cache and the JSON path).
  const replays: number[] = [];
  let state: Awaited<ReturnType<typeof replay>> = null;
  for (let i = 0; i < 5; i++) {
    t = performance.now();
    state = await replay({ runId: big.id });
    replays.push(performance.now() - t);
  }
  const replayMs = [...replays].sort((a, b) => a - b)[2]!;
  const ofRaw = (perSec: number) => `${fmt((100 * perSec) / rawPerSec, 1)} % of raw`;

  printTable([
    { measure: "raw SQLite commits/s (ceiling)", value: fmt(rawPerSec, 0), note: "one INSERT per autocommit, same file and pragmas; best of 3 after a warm-up" },
    { measure: "appendEvent/s, 1 writer", value: fmt(singlePerSec, 0), note: ofRaw(singlePerSec) },
    { measure: "appendEvent/s, 8 concurrent writers", value: fmt(concurrentPerSec, 0), note: ofRaw(concurrentPerSec) },
    { measure: "appendEvent/s, 64 concurrent writers", value: fmt(manyPerSec, 0), note: ofRaw(manyPerSec) },
    { measure: `replay ms, ${state?.lastSequence} events (median of 5)`, value: fmt(replayMs, 1), note: `first ${fmt(replays[0]!, 1)} ms; goal < 50 ms` },
  ]);
  console.log(`goal: appendEvent ≥ 50 % of the raw commit rate (best: ${ofRaw(Math.max(singlePerSec, concurrentPerSec, manyPerSec))}); replay < 50 ms (${fmt(replayMs, 1)} ms)`);
  closeDb();
}
