import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fmt, percentile, printTable, useTempDatabase } from "./lib";

/**
 * The run workflow on the embedded executor (in-process transport, demo model, local sandbox, a real git repository):
 * orchestration cost of a full-auto run (per run and per stage, from event timestamps, model time excluded), runs per
 * minute with 20 started at once, and approve → implementation-started latency.
 */
export async function run() {
  useTempDatabase("workflow");
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { ownAppTarget } = await import("@/inngest/embedded");
  const { Executor } = await import("@/lib/executor");
  const { inngest } = await import("@/inngest");
  const { runStarted, gateDecided } = await import("@/inngest/events");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { createProject } = await import("@/lib/projects/queries");
  const { getRunState, listEvents } = await import("@/lib/db/event-store");
  const { startRun } = await import("@/lib/runs/service");
  const { approveGate } = await import("@/lib/runs/gates/decide-gate");
  const { getDb, closeDb } = await import("@/lib/db");
  const { gates, modelCalls } = await import("@/lib/db/schema");
  const { and, eq } = await import("drizzle-orm");

  const executor = new Executor({
    // Gatehouse's own app in signed mode, in-process, as the server runs it.
    apps: [ownAppTarget({ inProcess: true })],
    pollMs: 50,
    leaseMs: 5_000,
    backoff: () => 50,
    log: () => {},
  });
  await executor.start();
  const owner = await ensureLocalOwner();
  const user = { id: owner.id, name: owner.name, via: "admin-token" as const };
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-bench-repo-"));
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=B", "-c", "user.email=b@example.com", ...args], { cwd: repo, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(repo, "README.md"), "# bench\n");
  git("add", ".");
  git("commit", "-q", "-m", "init");
  const project = await createProject({ name: "bench", ownerId: owner.id, repository: { type: "local", path: repo } });
  const db = await getDb();

  const launch = async (i: number, planning: "auto" | "manual") => {
    const r = await startRun({ user, projectId: project.id, request: `Bench ${i}\n\n\`\`\`file:src/b${i}.txt\nbench ${i}\n\`\`\``, config: { trustMode: { planning } } });
    await inngest.send(runStarted.create({ runId: r.id }));
    return r.id;
  };
  const waitUntil = async <T>(check: () => Promise<T | null | undefined | false>) => {
    for (;;) {
      const v = await check();
      if (v) return v;
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  const done = (id: string) => waitUntil(async () => (await getRunState({ id }))?.status === "completed");

  // 1. Full-auto runs, one at a time: wall time, per stage (from event timestamps), model time excluded.
  const N = 8;
  const walls: number[] = [];
  const orchestration: number[] = [];
  const stageMs: Record<string, number[]> = { planning: [], implementation: [], validation: [], delivery: [] };
  for (let i = 0; i < N + 1; i++) {
    const t = performance.now();
    const id = await launch(i, "auto");
    await done(id);
    const wall = performance.now() - t;
    if (i === 0) continue; // warm-up
    const events = await listEvents({ runId: id, limit: 10_000 });
    const calls = await db.select().from(modelCalls).where(eq(modelCalls.workflowRunId, id));
    const modelMs = calls.reduce((sum, c) => sum + c.latencyMs, 0);
    walls.push(wall);
    orchestration.push(wall - modelMs);
    const marks = events.filter((e) => e.type === "STAGE_STARTED" || e.type === "RUN_COMPLETED");
    for (let k = 0; k < marks.length - 1; k++) {
      const stage = (marks[k]!.payload as { stage: string }).stage;
      const ms = +marks[k + 1]!.timestamp - +marks[k]!.timestamp;
      const stageModel = calls.filter((c) => c.stage === stage).reduce((sum, c) => sum + c.latencyMs, 0);
      stageMs[stage]?.push(ms - stageModel);
    }
  }

  // 2. Twenty runs started at once (MAX_CONCURRENT_RUNS_PER_USER = 5 of them active at a time).
  let t = performance.now();
  const parallel = await Promise.all(Array.from({ length: 20 }, (_, i) => launch(100 + i, "auto")));
  await Promise.all(parallel.map(done));
  const parallelMs = performance.now() - t;

  // 3. Approve → implementation started, one run at a time.
  const latencies: number[] = [];
  for (let i = 0; i < 21; i++) {
    const id = await launch(200 + i, "manual");
    const gate = await waitUntil(async () => (await db.select().from(gates).where(and(eq(gates.workflowRunId, id), eq(gates.status, "pending"))))[0]);
    await waitUntil(async () => (await getRunState({ id }))?.status === "awaiting_approval");
    const t0 = Date.now();
    await approveGate({ user, runId: id, input: { gateId: gate.id } });
    await inngest.send(gateDecided.create({ runId: id, gateId: gate.id, decision: "approve" }));
    const started = await waitUntil(async () =>
      (await listEvents({ runId: id, limit: 10_000 })).find((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation"),
    );
    if (i > 0) latencies.push(+started.timestamp - t0);
    await done(id);
  }
  t = performance.now() - t;

  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  printTable([
    { measure: `full-auto demo run, wall ms (mean of ${N})`, value: fmt(mean(walls), 0), p95: fmt(percentile(walls, 95), 0) },
    { measure: "  orchestration ms per run (model time excluded)", value: fmt(mean(orchestration), 0), p95: fmt(percentile(orchestration, 95), 0) },
    ...Object.entries(stageMs).map(([stage, xs]) => ({ measure: `  ${stage} stage ms (model excluded)`, value: fmt(mean(xs), 0), p95: fmt(percentile(xs, 95), 0) })),
    { measure: "20 runs at once: total s", value: fmt(parallelMs / 1000, 1), p95: "" },
    { measure: "20 runs at once: runs per minute", value: fmt((20 * 60_000) / parallelMs, 1), p95: "" },
    { measure: `approve → implementation started ms, p50 (${latencies.length} runs)`, value: fmt(percentile(latencies, 50), 0), p95: fmt(percentile(latencies, 95), 0) },
  ]);
  await executor.stop();
  closeDb();
}
