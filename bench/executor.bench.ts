import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";

/**
 * Embedded executor: per-step overhead (sequential 20-step no-op function), workflows/s with 50 runs in flight, and
 * event → waiting run resumed latency, beside the raw SQLite commit rate measured on the same database in this run.
 * Each figure for the in-process transport (executor and app in one process) and for HTTP (separate processes).
 */

export async function run(): Promise<void> {
  // A throwaway database, like the tests: the bench must not write runs into the developer's data directory.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-bench-"));
  process.env.DATABASE_URL = `file:${path.join(dir, "bench.db")}`;
  process.env.GATEHOUSE_DATA_DIR = dir;
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { closeDb, getClient } = await import("@/lib/db");
  closeDb();
  const { Executor, sendEvents } = await import("@/lib/executor");
  const { tx } = await import("@/lib/executor/store");
  await getClient();

  // Raw commit ceiling: one single-row write transaction at a time through the same write path.
  await tx((t) => t.execute("CREATE TABLE IF NOT EXISTS bench_commits (id INTEGER PRIMARY KEY, v TEXT)"));
  const commits = 2000;
  const c0 = performance.now();
  for (let i = 0; i < commits; i++) await tx((t) => t.execute({ sql: "INSERT INTO bench_commits (v) VALUES (?)", args: [String(i)] }));
  const commitMs = (performance.now() - c0) / commits;

  const resumed = new Map<string, number>();
  const inngest = new Inngest({ id: "bench", isDev: true, baseUrl: "http://127.0.0.1:1" });
  const functions = [
    inngest.createFunction({ id: "twenty", retries: 0, triggers: [{ event: "bench/twenty" }] }, async ({ step }) => {
      for (let i = 0; i < 20; i++) await step.run(`s${i}`, () => i);
      return "done";
    }),
    inngest.createFunction({ id: "three", retries: 0, triggers: [{ event: "bench/three" }] }, async ({ step }) => {
      for (let i = 0; i < 3; i++) await step.run(`s${i}`, () => i);
      return "done";
    }),
    inngest.createFunction({ id: "resume", retries: 0, triggers: [{ event: "bench/resume" }] }, async ({ event, step }) => {
      await step.run("before", () => 1);
      await step.waitForEvent("go", { event: "bench/go", match: "data.k", timeout: "1h" });
      await step.run("after", () => {
        if (!resumed.has(String(event.data.k))) resumed.set(String(event.data.k), performance.now());
      });
    }),
  ];
  const sdkHandler = serve({ client: inngest, functions }) as (r: Request) => Promise<Response>;
  // Time spent inside the SDK's serve handler (replaying the function), to separate the executor's own overhead.
  let inSdkMs = 0;
  const handler = async (request: Request) => {
    const t = performance.now();
    const response = await sdkHandler(request);
    const body = await response.text();
    inSdkMs += performance.now() - t;
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const response = await sdkHandler(
      new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body: req.method === "GET" ? undefined : Buffer.concat(chunks) }),
    );
    res.statusCode = response.status;
    response.headers.forEach((v, k) => res.setHeader(k, v));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const serveUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/inngest`;
  const load = os.loadavg()[0]!.toFixed(1);

  const rowsOut: string[][] = [];
  for (const transport of ["in-process", "http"] as const) {
    const finished = new Map<string, () => void>();
    const waiters: ((id: string) => void)[] = [];
    const executor = new Executor({
      apps: [transport === "in-process" ? { url: serveUrl, handler } : { url: serveUrl }],
      pollMs: 200,
      maxConcurrentRuns: 50,
      log: () => undefined,
      onRunFinished: ({ id }) => {
        finished.get(id)?.();
        for (const w of waiters) w(id);
      },
    });
    await executor.start();
    const runOnce = async (name: string, data: Record<string, unknown>) => {
      const { query } = await import("@/lib/executor/store");
      const t0 = performance.now();
      const { ids } = await sendEvents({ name, data });
      // the run id is not the event id; find it by its trigger event
      const [row] = await query<{ id: string; status: string }>("SELECT id, status FROM executor_runs WHERE json_extract(event, '$.id') = ?", [ids[0]!]);
      if (row!.status !== "completed") await new Promise<void>((r) => finished.set(row!.id, r));
      return performance.now() - t0;
    };

    // Per-step overhead: one run at a time.
    for (let i = 0; i < 3; i++) await runOnce("bench/twenty", { warm: i });
    const perStep: number[] = [];
    const ownPerStep: number[] = [];
    for (let i = 0; i < 30; i++) {
      const sdkBefore = inSdkMs;
      const ms = await runOnce("bench/twenty", { i });
      perStep.push(ms / 20);
      ownPerStep.push((ms - (inSdkMs - sdkBefore)) / 20);
    }

    // Throughput: 300 runs of a 3-step function, 50 in flight.
    const total = 300;
    let done = 0;
    const allDone = new Promise<void>((r) => waiters.push(() => ++done === total && r()));
    const t0 = performance.now();
    for (let i = 0; i < total; i += 50) await sendEvents(Array.from({ length: 50 }, (_, j) => ({ name: "bench/three", data: { i: i + j } })));
    await allDone;
    waiters.length = 0;
    const perSecond = total / ((performance.now() - t0) / 1000);

    // Resume latency: event sent to a waiting run → the step after the wait runs.
    const { query } = await import("@/lib/executor/store");
    const latencies: number[] = [];
    for (let i = 0; i < 40; i++) {
      const k = `${transport}-${i}`;
      await sendEvents({ name: "bench/resume", data: { k } });
      for (;;) {
        const [r] = await query<{ n: number }>(
          "SELECT count(*) AS n FROM executor_runs WHERE status = 'waiting' AND json_extract(event, '$.data.k') = ?",
          [k],
        );
        if (Number(r?.n) > 0) break;
        await new Promise((res) => setTimeout(res, 2));
      }
      const s = performance.now();
      await sendEvents({ name: "bench/go", data: { k } });
      while (!resumed.has(k)) await new Promise((res) => setImmediate(res));
      if (i >= 5) latencies.push(resumed.get(k)! - s);
    }
    await executor.stop();

    rowsOut.push([`per-step overhead (${transport})`, fmt(pct(perStep, 50)), fmt(pct(perStep, 95)), "ms/step"]);
    if (transport === "in-process") {
      rowsOut.push(["  of which the executor (outside the SDK handler)", fmt(pct(ownPerStep, 50)), fmt(pct(ownPerStep, 95)), "ms/step"]);
    }
    rowsOut.push([`workflows/s, 50 in flight, 3 steps (${transport})`, perSecond.toFixed(0), "", "runs/s"]);
    rowsOut.push([`event → resumed (${transport})`, fmt(pct(latencies, 50)), fmt(pct(latencies, 95)), "ms"]);
  }
  rowsOut.push(["SQLite commit (same database, same write path)", fmt(commitMs), "", `ms (${(1000 / commitMs).toFixed(0)} commits/s)`]);
  server.closeAllConnections();
  server.close();

  console.log(`${os.cpus().length} cores, load average ${load} at start\n`);
  console.log(`| measure | p50 / value | p95 | unit |\n|---|---|---|---|`);
  for (const r of rowsOut) console.log(`| ${r.join(" | ")} |`);
  console.log("\nFirst bar: ≤ 5 ms/step p50, ≤ 20 ms resume p95. Goal: < 0.7 ms/step p50, < 2 ms resume p95.");
  fs.rmSync(dir, { recursive: true, force: true });
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function fmt(n: number): string {
  return n < 10 ? n.toFixed(2) : n.toFixed(1);
}
