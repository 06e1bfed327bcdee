import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fmt, printTable, useTempDatabase } from "./lib";

/**
 * Long pauses: N runs parked at their plan gate. While they wait, the server should hold no sandbox, drive nothing and
 * burn (almost) no CPU. Prints the time to park them, then CPU and memory over an idle window. `npm run bench -- waiting`
 * (N from GATEHOUSE_BENCH_WAITING_RUNS, default 1000).
 */
export async function run() {
  const dir = useTempDatabase("waiting");
  const n = Number(process.env.GATEHOUSE_BENCH_WAITING_RUNS ?? 1000);
  process.env.MAX_CONCURRENT_RUNS_PER_USER = String(n + 10);
  process.env.GATEHOUSE_RATE_LIMIT_RUNS = String(n + 10);
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { startWorkflowHarness, launch, newProject } = await import("../tests/workflow/harness");
  const { getDb, closeDb } = await import("@/lib/db");
  const { workflowRuns } = await import("@/lib/db/schema");
  const { eq, count } = await import("drizzle-orm");

  const h = await startWorkflowHarness();
  const { project } = await newProject(h.user);
  const started = performance.now();
  for (let i = 0; i < n; i++) await launch(h.user, project.id, `Waiting run ${i}`, { trustMode: { planning: "manual" } });
  const db = await getDb();
  const waiting = async () =>
    (await db.select({ n: count() }).from(workflowRuns).where(eq(workflowRuns.status, "awaiting_approval")))[0]!.n;
  while ((await waiting()) < n) await new Promise((r) => setTimeout(r, 200));
  const parkMs = performance.now() - started;

  // Idle window: everything is parked; measure what the process spends while nothing happens.
  await new Promise((r) => setTimeout(r, 1000));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, 10_000));
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - t0;
  const status = await h.executor.status();
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;
  const workspaces = fs.existsSync(path.join(dir, "workspaces")) ? fs.readdirSync(path.join(dir, "workspaces")).length : 0;

  printTable([
    { measure: "runs parked at the plan gate", value: n },
    { measure: "time to start and park them (s)", value: fmt(parkMs / 1000, 1) },
    { measure: "runs per second to the gate", value: fmt(n / (parkMs / 1000), 1) },
    { measure: "CPU while all wait (% of one core, 10 s window)", value: fmt(((cpu.user + cpu.system) / 1000 / wallMs) * 100, 2) },
    { measure: "executor runs in flight while waiting", value: status.inFlight },
    { measure: "sandboxes (worktrees) held while waiting", value: workspaces },
    { measure: gc ? "JS heap after GC (MiB)" : "JS heap (MiB; run with NODE_OPTIONS=--expose-gc for after-GC)", value: fmt(heapMiB, 0) },
    { measure: "RSS (MiB)", value: fmt(process.memoryUsage().rss / 2 ** 20, 0) },
  ]);
  await h.close();
  closeDb();
}
