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

  // Raw SQLite commit rate: one INSERT per autocommit transaction on the same file, same pragmas.
  const client = await getClient();
  await client.execute("create table if not exists bench_raw (id integer primary key, v text)");
  const rawN = 2000;
  let t = performance.now();
  for (let i = 0; i < rawN; i++) await client.execute({ sql: "insert into bench_raw (v) values (?)", args: [`v${i}`] });
  const rawPerSec = rawN / ((performance.now() - t) / 1000);

  // One writer.
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

  // Replay of a 10,000-event run.
  const big = await newRun();
  await appendEvent(big.id, { type: "RUN_STARTED", payload: {} });
  const { appendEvents } = await import("@/lib/db/queries/runs");
  for (let i = 0; i < 9998; i += 500) {
    await appendEvents(big.id, Array.from({ length: Math.min(500, 9998 - i) }, (_, j) => artifact(i + j)));
  }
  t = performance.now();
  const state = await replay({ runId: big.id });
  const replayMs = performance.now() - t;

  printTable([
    { measure: "raw SQLite commits/s (ceiling)", value: fmt(rawPerSec, 0) },
    { measure: "appendEvent/s, 1 writer", value: fmt(singlePerSec, 0) },
    { measure: "appendEvent/s, 8 concurrent writers", value: fmt(concurrentPerSec, 0) },
    { measure: `replay ms, ${state?.lastSequence} events`, value: fmt(replayMs, 1) },
  ]);
  closeDb();
}
