import { performance } from "node:perf_hooks";
import { fmt, printTable, useTempDatabase } from "./lib";

/** Event store: append throughput (1 and 8 writers), replay of a 10,000-event run, and SQLite's raw commit ceiling. */
export async function run() {
  useTempDatabase("db");
  const { getClient, closeDb } = await import("@/lib/db");
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { createProject } = await import("@/lib/projects/queries");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { createRun } = await import("@/lib/db/queries/runs");
  const { appendEvent, replay } = await import("@/lib/db/event-store");

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

  // Appends, measured as the ceiling is: the best of three rounds (each on fresh runs), after a warm-up of 500 appends
  // on another run. The median of the three is printed beside it.
  const warm = await newRun();
  await appendEvent(warm.id, { type: "RUN_STARTED", payload: {} });
  for (let i = 0; i < 500; i++) await appendEvent(warm.id, artifact(i));
  /** Appends/s of `writers` concurrent writers, each on a run of its own appending `perWriter` events one at a time. */
  const appendRate = async (writers: number, perWriter: number) => {
    const rates: number[] = [];
    for (let round = 0; round < 3; round++) {
      const runs = await Promise.all(Array.from({ length: writers }, () => newRun()));
      for (const r of runs) await appendEvent(r.id, { type: "RUN_STARTED", payload: {} });
      const start = performance.now();
      await Promise.all(
        runs.map(async (r) => {
          for (let i = 0; i < perWriter; i++) await appendEvent(r.id, artifact(i));
        }),
      );
      rates.push((writers * perWriter) / ((performance.now() - start) / 1000));
    }
    const sorted = [...rates].sort((a, b) => a - b);
    return { best: sorted[2]!, median: sorted[1]! };
  };
  // One writer: each append awaited before the next, so every append is a commit of its own.
  const single = await appendRate(1, 2000);
  // Eight concurrent writers, each on its own run.
  const concurrent = await appendRate(8, 300);
  // Many runs appending at once (a busy server): where the one write queue can group commits.
  const many = await appendRate(64, 60);

  // Replay of a 10,000-event run.
  const big = await newRun();
  await appendEvent(big.id, { type: "RUN_STARTED", payload: {} });
  const { appendEvents } = await import("@/lib/db/event-store");
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

  const appendNote = (rate: { best: number; median: number }) => `${ofRaw(rate.best)} (median of 3: ${fmt(rate.median, 0)}/s, ${ofRaw(rate.median)})`;
  printTable([
    { measure: "raw SQLite commits/s (ceiling)", value: fmt(rawPerSec, 0), note: "one INSERT per autocommit, same file and pragmas; best of 3 after a warm-up" },
    { measure: "appendEvent/s, 1 writer (best of 3)", value: fmt(single.best, 0), note: appendNote(single) },
    { measure: "appendEvent/s, 8 concurrent writers (best of 3)", value: fmt(concurrent.best, 0), note: appendNote(concurrent) },
    { measure: "appendEvent/s, 64 concurrent writers (best of 3)", value: fmt(many.best, 0), note: appendNote(many) },
    { measure: `replay ms, ${state?.lastSequence} events (median of 5)`, value: fmt(replayMs, 1), note: `first ${fmt(replays[0]!, 1)} ms; goal < 50 ms` },
  ]);
  console.log(`goal: appendEvent ≥ 50 % of the raw commit rate (1 writer: ${ofRaw(single.best)}; 64 writers: ${ofRaw(many.best)}); replay < 50 ms (${fmt(replayMs, 1)} ms)`);
  closeDb();
}
