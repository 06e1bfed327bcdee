import { performance } from "node:perf_hooks";
import { fmt, percentile, printTable, useTempDatabase } from "./lib";

/**
 * The product's own path (issue 33): "Approve clicked → the implementation step started". Runs wait at their plan gate
 * (manual planning, the offline demo model); the bench POSTs the real approve route (auth, rate limit, body, the
 * decision and its announcement) and times until the run's implementation stage has started (its STAGE_STARTED
 * event committed, written by the workflow's first implementation step), with the embedded executor started as the
 * web server starts it (startEmbeddedExecutor: startExecutor's defaults, Gatehouse's own app in-process, signed).
 * Each run is let finish before the next is approved, and each click waits for a settled executor — the run parked at
 * its gate and no function run (the gate's notification, an earlier approval's re-announcer, whose first look comes a
 * second after its click) running or due within 1.5 s — so no other work overlaps a measurement, as a person's click
 * seconds after the gate appeared does not. The end is seen by a 1 ms poll of a prepared statement on the native
 * reader (10–40 µs a poll; through the client's pool, which prepares the SQL on every call, it was 90–160 µs, some
 * 4 ms of the event loop in a 40 ms window, spent on the measurement itself). The events the
 * run wrote in between are listed with their median time after the click (where the time goes). Measured with the
 * default run config (triage runs each task's checks in the sandbox before implementing; the demo's plan has none, so
 * its files are looked up) and with triage off, then — apart from the goal — a plan whose last task has two checks.
 * `npm run bench -- approve` (N from GATEHOUSE_BENCH_APPROVALS, default 12 per variant). Goal: p50 < 50 ms, p95 < 100 ms.
 */
export async function run() {
  useTempDatabase("approve");
  const n = Number(process.env.GATEHOUSE_BENCH_APPROVALS ?? 12);
  process.env.GATEHOUSE_ADMIN_TOKEN ??= "bench-admin-token-0123456789";
  process.env.MAX_CONCURRENT_RUNS_PER_USER = String(n + 10);
  process.env.GATEHOUSE_RATE_LIMIT_RUNS = String(n + 10);
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { launch, newProject, waitForPendingGate, waitForWorkflow } = await import("../tests/workflow/harness");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { startEmbeddedExecutor } = await import("@/inngest/embedded");
  const { stopExecutor } = await import("@/lib/executor");
  const { POST: approveRoute } = await import("@/app/api/runs/[id]/approve/route");
  const { getClient, getNative, closeDb } = await import("@/lib/db");

  await startEmbeddedExecutor();
  const owner = await ensureLocalOwner();
  const user = { id: owner.id, name: owner.name, via: "admin-token" as const };
  const { project } = await newProject(user);
  const client = await getClient();
  const native = await getNative();
  if (!native) throw new Error("the approve bench runs on a file database");
  /** Whether the run's implementation stage has started (one indexed read of its event log, prepared once). */
  const implementing = (runId: string) =>
    native.reader.execute(
      `SELECT 1 FROM workflow_events WHERE workflow_run_id = ? AND type = 'STAGE_STARTED'
         AND json_extract(payload, '$.stage') = 'implementation' LIMIT 1`,
      [runId],
    ).rows.length > 0;
  /** Whether no function run is running, runnable, or due within 1.5 s (the run itself parked at its gate's wait). */
  const settled = (runId: string) =>
    native.reader.execute(
      `SELECT (SELECT count(*) FROM executor_runs WHERE status IN ('queued', 'running')
                 OR (status IN ('sleeping', 'waiting') AND next_at <= ?)) AS busy,
              (SELECT count(*) FROM executor_runs WHERE status = 'waiting' AND json_extract(event, '$.data.runId') = ?) AS parked`,
      [Date.now() + 1500, runId],
    ).rows[0] as { busy: number; parked: number };
  const untilSettled = async (runId: string) => {
    const until = Date.now() + 30_000;
    for (;;) {
      const s = settled(runId);
      if (Number(s.busy) === 0 && Number(s.parked) > 0) return;
      if (Date.now() > until) throw new Error(`the executor did not settle before approving ${runId}: ${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  const table: Array<Record<string, string | number>> = [];
  for (const variant of [
    { label: "default config", config: {}, request: "" },
    { label: "triage off", config: { triage: { enabled: false } }, request: "" },
    // Not the goal's measure (the demo's plan has no checks): what a plan with checks costs, triage running them.
    { label: "plan with 2 checks", config: {}, request: "\n[verify: test -f README.md]\n[verify: grep -q fixture README.md]" },
  ]) {
    const latencies: number[] = [];
    const routeMs: number[] = [];
    const offsets = new Map<string, number[]>();
    for (let i = 0; i < n + 3; i++) {
      const run = await launch(user, project.id, `Approve bench ${i}${variant.request}`, { trustMode: { planning: "manual" }, ...variant.config });
      const gate = await waitForPendingGate(run.id);
      await untilSettled(run.id);
      const request = new Request(`http://127.0.0.1:3000/api/runs/${run.id}/approve`, {
        method: "POST",
        headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ gateId: gate.id }),
      });
      const t0 = performance.now();
      const response = await approveRoute(request, { params: Promise.resolve({ id: run.id }) });
      const answered = performance.now();
      if (response.status !== 200) throw new Error(`approve answered ${response.status}: ${await response.text()}`);
      // Polled every millisecond: the figure is at most ~1 ms late, and a read does not hold up the writes.
      while (!implementing(run.id)) await new Promise((r) => setTimeout(r, 1));
      if (i >= 3) {
        latencies.push(performance.now() - t0);
        routeMs.push(answered - t0);
        // Where the time went: the events written from the click to the implementation stage, by time after the click.
        const clicked = Date.now() - (performance.now() - t0);
        const rows = await client.execute({
          sql: `SELECT type, json_extract(payload, '$.stage') AS stage, timestamp FROM workflow_events WHERE workflow_run_id = ?
                  AND timestamp >= ? ORDER BY sequence`,
          args: [run.id, Math.floor(clicked)],
        });
        for (const row of rows.rows) {
          const label = `${row.type}${row.stage ? ` (${row.stage})` : ""}`;
          (offsets.get(label) ?? offsets.set(label, []).get(label)!).push(Number(row.timestamp) - clicked);
          if (label === "STAGE_STARTED (implementation)") break;
        }
      }
      await waitForWorkflow(run.id, 120_000);
    }
    table.push(
      { measure: `${variant.label}: approve route → implementation step started, p50 (ms)`, value: fmt(percentile(latencies, 50), 1) },
      { measure: `${variant.label}: approve route → implementation step started, p95 (ms)`, value: fmt(percentile(latencies, 95), 1) },
      { measure: `${variant.label}: approve route answered, p50 / p95 (ms)`, value: `${fmt(percentile(routeMs, 50), 1)} / ${fmt(percentile(routeMs, 95), 1)}` },
      { measure: `${variant.label}: approvals measured`, value: latencies.length },
      ...[...offsets].map(([label, ms]) => ({ measure: `  ${label} written, p50 after the click (ms)`, value: fmt(percentile(ms, 50), 0) })),
    );
  }
  printTable(table);
  console.log("Goal (issue 33): approve → implementation step started p50 < 50 ms, p95 < 100 ms.");
  await stopExecutor();
  closeDb();
}
