import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";

/**
 * Embedded executor, alone and as its users call it. Alone (the first rows): events ingested with sendEvents() and an
 * Executor built with pollMs 200 and 50 slots, the shortest path to the executor's own costs. As users call it
 * (executor-users.ts): an Inngest client sends the events (in-process through Gatehouse's own embeddedFetch), the
 * executor runs with startExecutor's defaults, and the standalone worker drives an app over HTTP from its own process.
 * Alone: the libSQL single-commit floor, then per step cost (20- and 100-step no-op chains), workflows/s
 * with 50 runs in flight, and signal → waiting run resumed latency, each with its ratio to the commit floor, for the
 * in-process transport (executor and app in one process, checkpoints through the client's fetch) and for HTTP
 * (serve calls and checkpoint calls over loopback sockets).
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

  /** When (wall clock and this process's CPU time) the step after the wait ran, per signal key; and who waits for it. */
  const resumed = new Map<string, { at: number; cpu: NodeJS.CpuUsage }>();
  const onResumed = new Map<string, () => void>();
  const { checkpointingFetch, handleCheckpointRequest, CHECKPOINT_PATH } = await import("@/lib/executor/checkpoint");
  /** The same functions on two clients: in-process (checkpoints through the client's fetch) and HTTP (a real route). */
  const build = (baseUrl: string, inProcess: boolean) => {
    const inngest = new Inngest({ id: "bench", isDev: true, baseUrl, ...(inProcess ? { fetch: checkpointingFetch() } : {}) });
    const chain = (id: string, n: number) =>
      inngest.createFunction({ id, retries: 0, triggers: [{ event: `bench/${id}` }] }, async ({ step }) => {
        for (let i = 0; i < n; i++) await step.run(`s${i}`, () => i);
        return "done";
      });
    const functions = [
      chain("twenty", 20),
      chain("hundred", 100),
      inngest.createFunction({ id: "resume", retries: 0, triggers: [{ event: "bench/resume" }] }, async ({ event, step }) => {
        await step.run("before", () => 1);
        await step.waitForEvent("go", { event: "bench/go", match: "data.k", timeout: "1h" });
        await step.run("after", () => {
          const k = String(event.data.k);
          if (!resumed.has(k)) resumed.set(k, { at: performance.now(), cpu: process.cpuUsage() });
          onResumed.get(k)?.();
        });
      }),
    ];
    return serve({ client: inngest, functions }) as (r: Request) => Promise<Response>;
  };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body: req.method === "GET" ? undefined : Buffer.concat(chunks) });
    const response = CHECKPOINT_PATH.test(new URL(request.url).pathname) ? await handleCheckpointRequest(request) : await httpHandler(request);
    res.statusCode = response.status;
    response.headers.forEach((v, k) => res.setHeader(k, v));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const serveUrl = `${origin}/api/inngest`;
  const httpHandler = build(origin, false);
  const inProcessHandler = build(origin, true);
  const load = os.loadavg()[0]!.toFixed(1);
  const cpuStart = process.cpuUsage();
  const wallStart = performance.now();

  const rowsOut: string[][] = [["libSQL single commit (floor: same database, same write path)", fmt(commitMs), "", `ms (${(1000 / commitMs).toFixed(0)} commits/s)`]];
  for (const transport of ["in-process", "http"] as const) {
    const finished = new Map<string, () => void>();
    const waiters: ((id: string) => void)[] = [];
    const executor = new Executor({
      apps: [transport === "in-process" ? { url: serveUrl, handler: inProcessHandler, checkpointing: true } : { url: serveUrl, checkpointing: true }],
      pollMs: 200,
      maxConcurrentRuns: 50,
      log: () => undefined,
      onRunFinished: ({ id }) => {
        finished.get(id)?.();
        for (const w of waiters) w(id);
      },
    });
    await executor.start();
    const { query } = await import("@/lib/executor/store");
    const runOnce = async (name: string, data: Record<string, unknown>) => {
      const t0 = performance.now();
      const { ids } = await sendEvents({ name, data });
      // the run id is not the event id; find it by its trigger event
      const [row] = await query<{ id: string; status: string }>("SELECT id, status FROM executor_runs WHERE json_extract(event, '$.id') = ?", [ids[0]!]);
      if (row!.status !== "completed") await new Promise<void>((r) => finished.set(row!.id, r));
      return performance.now() - t0;
    };

    // Per-step cost, one run at a time, for a 20-step and a 100-step chain (flat if it does not grow with length).
    for (const [name, steps, runs] of [["twenty", 20, 30], ["hundred", 100, 10]] as const) {
      for (let i = 0; i < 3; i++) await runOnce(`bench/${name}`, { warm: i });
      const perStep: number[] = [];
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < runs; i++) perStep.push((await runOnce(`bench/${name}`, { i })) / steps);
      const cpu = process.cpuUsage(cpu0);
      // CPU time of this process per step: unlike wall time, barely moved by other load on a shared machine.
      const cpuPerStep = (cpu.user + cpu.system) / 1000 / (runs * steps);
      rowsOut.push([
        `per step, ${steps}-step chain (${transport}, alone)`,
        fmt(pct(perStep, 50)),
        fmt(pct(perStep, 95)),
        `ms/step (${(pct(perStep, 50) / commitMs).toFixed(1)}× the commit floor; CPU ${fmt(cpuPerStep)} ms/step)`,
      ]);
    }

    // Throughput: 300 runs of the 20-step chain, 50 in flight.
    const total = 300;
    let done = 0;
    const allDone = new Promise<void>((r) => waiters.push(() => ++done === total && r()));
    const t0 = performance.now();
    const tcpu0 = process.cpuUsage();
    for (let i = 0; i < total; i += 50) await sendEvents(Array.from({ length: 50 }, (_, j) => ({ name: "bench/twenty", data: { i: i + j } })));
    await allDone;
    waiters.length = 0;
    const perSecond = total / ((performance.now() - t0) / 1000);
    const tcpu = process.cpuUsage(tcpu0);
    const cpuPerRun = (tcpu.user + tcpu.system) / 1000 / total;
    rowsOut.push([
      `workflows/s, 50 in flight, 20-step chain (${transport}, alone)`,
      perSecond.toFixed(0),
      "",
      `runs/s (${(1000 / perSecond / commitMs).toFixed(1)} commit floors per run; CPU ${fmt(cpuPerRun)} ms/run)`,
    ]);

    // Resume latency: event sent to a waiting run → the step after the wait runs.
    const measureResumes = async (label: string, count: number) => {
      const latencies: number[] = [];
      const cpuMs: number[] = [];
      // The first 5 warm up.
      for (let i = 0; i < count + 5; i++) {
        const k = `${transport}-${label}-${i}`;
        await sendEvents({ name: "bench/resume", data: { k } });
        for (;;) {
          const [r] = await query<{ n: number }>(
            "SELECT count(*) AS n FROM executor_runs WHERE status = 'waiting' AND json_extract(event, '$.data.k') = ?",
            [k],
          );
          if (Number(r?.n) > 0) break;
          await new Promise((res) => setTimeout(res, 2));
        }
        // Awaited on a promise the step resolves (no busy loop competing with the resume for the event loop); the
        // time is taken in the step itself.
        const seen = new Promise<void>((res) => onResumed.set(k, res));
        const cpu0 = process.cpuUsage();
        const s = performance.now();
        await sendEvents({ name: "bench/go", data: { k } });
        await seen;
        const { at, cpu } = resumed.get(k)!;
        if (i >= 5) {
          latencies.push(at - s);
          // CPU time of this process from the signal to the resumed step: barely moved by other load on the machine.
          cpuMs.push((cpu.user - cpu0.user + cpu.system - cpu0.system) / 1000);
        }
      }
      return {
        p50: pct(latencies, 50),
        p95: pct(latencies, 95),
        note: `ms (p99 ${fmt(pct(latencies, 99))}; ${latencies.length} resumes; ${(pct(latencies, 50) / commitMs).toFixed(1)}× the commit floor; CPU ${fmt(pct(cpuMs, 50))} / ${fmt(pct(cpuMs, 95))} ms p50 / p95)`,
      };
    };
    // 200 resumes: enough that the p95 is not decided by one or two samples.
    const alone = await measureResumes("alone", 200);
    rowsOut.push([`signal → resumed (${transport}, alone)`, fmt(alone.p50), fmt(alone.p95), alone.note]);
    if (transport === "in-process") {
      // The same with 1,000 other runs waiting on the same event name for other values (runs at an approval gate),
      // each with a 2 KB event: an event finds its waits by their match key, not by evaluating every one of them.
      const big = "x".repeat(2000);
      for (let i = 0; i < 1000; i += 100) {
        await sendEvents(Array.from({ length: 100 }, (_, j) => ({ name: "bench/resume", data: { k: `idle-${i + j}`, big } })));
      }
      for (;;) {
        const [r] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_runs WHERE status = 'waiting'");
        if (Number(r?.n) >= 1000) break;
        await new Promise((res) => setTimeout(res, 20));
      }
      const crowded = await measureResumes("crowded", 100);
      rowsOut.push([`signal → resumed, 1,000 other runs waiting on the event (${transport})`, fmt(crowded.p50), fmt(crowded.p95), crowded.note]);
      // The HTTP figures are taken alone again.
      for (const { id } of await query<{ id: string }>("SELECT id FROM executor_runs WHERE status = 'waiting'")) await executor.cancel(id);
    }
    await executor.stop();
  }
  server.closeAllConnections();
  server.close();

  // As users call it (issue 33): the same measures through an Inngest client, startExecutor's defaults and the worker.
  const { inProcessRows, workerRows } = await import("./executor-users");
  for (const row of await inProcessRows()) rowsOut.push(row);
  for (const row of await workerRows()) rowsOut.push(row);

  const cpuAll = process.cpuUsage(cpuStart);
  const share = (cpuAll.user + cpuAll.system) / 1000 / (performance.now() - wallStart);
  console.log(
    `${os.cpus().length} cores, load average ${load} at start, ${os.loadavg()[0]!.toFixed(1)} at end; this process used ${(100 * share).toFixed(0)} % of one core ` +
      `(its CPU time per step is the figure to compare across runs on a shared machine); checkpointing on (Inngest's default for v4 apps)\n`,
  );
  console.log(`| measure | p50 / value | p95 | unit |\n|---|---|---|---|`);
  for (const r of rowsOut) console.log(`| ${r.join(" | ")} |`);
  console.log("\nGoal (issue 14): per step < 0.6 ms p50 in-process, < 2 ms over HTTP, flat 20→100; resume < 1.5 ms p95; > 150 workflows/s.");
  console.log("Goal (issue 33, as users call it, the referee ../shared/peer-bench on Node 20): in-process per step and resume p95 below Mastra's, 2× its workflows/s; over HTTP per step < 1 ms p50, resume p95 < 2.5 ms.");
  fs.rmSync(dir, { recursive: true, force: true });
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function fmt(n: number): string {
  return n < 10 ? n.toFixed(2) : n.toFixed(1);
}
