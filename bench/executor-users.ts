import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { Inngest } from "inngest";
import { serve as serveEdge } from "inngest/edge";
import { serve as serveNode } from "inngest/node";

/**
 * The executor as its users call it (issue 33), next to executor.bench.ts's rows for the executor alone:
 * - in-process: an app client like Gatehouse's own (signed mode, its signing key and event key from the executor key,
 *   `fetch` = inngest/client.ts's embeddedFetch, checkpointing on); events sent with `inngest.send()`; the executor
 *   started with `startExecutor`'s defaults (poll 500 ms, 200 runs at once);
 * - the standalone worker (`scripts/worker.ts`, its defaults, `--checkpointing`) in its own process, driving an app
 *   served by inngest/node in this process over HTTP; the app sends events to the worker's /e/<key> and checkpoints
 *   to its /v1/checkpoint, as the README's "Other apps on the worker" sets it up (signed).
 * Measured as the referee (../shared/peer-bench) measures: per step of a 20-step chain run alone (wall / 20),
 * workflows/s with 50 started at once, and signal sent → the step after the wait started, with the run parked.
 */

export type Row = [string, string, string, string];

const STEPS = 20;

type Probe = {
  /** Resolves when run `k` of the chain returns (its last step done), or when `k`'s step after the wait starts. */
  chainDone: Map<string, () => void>;
  resumed: Map<string, number>;
  onResumed: Map<string, () => void>;
};

function functions(inngest: Inngest, probe: Probe) {
  return [
    inngest.createFunction({ id: "chain", retries: 0, triggers: [{ event: "users/chain" }] }, async ({ event, step }) => {
      for (let i = 0; i < STEPS; i++) await step.run(`s${i}`, () => i);
      probe.chainDone.get(String(event.data.k))?.();
      return "done";
    }),
    inngest.createFunction({ id: "gate", retries: 0, triggers: [{ event: "users/gate" }] }, async ({ event, step }) => {
      const k = String(event.data.k);
      await step.run("before", () => 1);
      await step.waitForEvent("go", { event: "users/go", match: "data.k", timeout: "1h" });
      await step.run("after", () => {
        if (!probe.resumed.has(k)) probe.resumed.set(k, performance.now());
        probe.onResumed.get(k)?.();
      });
    }),
  ];
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}
const fmt = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));

type Send = (name: string, data: Record<string, unknown>) => Promise<unknown>;
type IsWaiting = (k: string) => Promise<boolean>;
/** A call to the serve handler, as copied: what is needed to build it again. */
type ResumeCall = { url: string; headers: [string, string][]; body: string };

/**
 * Run `k` of the gate function to its wait (parked), then signal it: ms from the signal sent to the step after the wait
 * started. `beforeSignal` runs once the run is parked.
 */
async function resumeOnce(k: string, send: Send, probe: Probe, isWaiting: IsWaiting, beforeSignal?: () => void): Promise<number> {
  await send("users/gate", { k });
  while (!(await isWaiting(k))) await new Promise((r) => setTimeout(r, 2));
  beforeSignal?.();
  const seen = new Promise<void>((r) => probe.onResumed.set(k, r));
  const t0 = performance.now();
  await send("users/go", { k });
  await seen;
  return probe.resumed.get(k)! - t0;
}

/** The three measures, for an app whose events go out with `send` and whose parked runs `isWaiting` finds. */
async function measure(label: string, send: Send, probe: Probe, isWaiting: IsWaiting): Promise<Row[]> {
  let n = 0;
  const runChain = async (tag: string) => {
    const k = `${label}-${tag}-${n++}`;
    const done = new Promise<void>((r) => probe.chainDone.set(k, r));
    await send("users/chain", { k });
    await done;
    probe.chainDone.delete(k);
  };
  for (let i = 0; i < 3; i++) await runChain("warm");
  const perStep: number[] = [];
  const cpu0 = process.cpuUsage();
  const runs = 30;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await runChain("seq");
    perStep.push((performance.now() - t0) / STEPS);
  }
  const cpu = process.cpuUsage(cpu0);
  const t1 = performance.now();
  await Promise.all(Array.from({ length: 50 }, () => runChain("conc")));
  const perSecond = 50 / ((performance.now() - t1) / 1000);

  const latencies: number[] = [];
  for (let i = 0; i < 105; i++) {
    const latency = await resumeOnce(`${label}-gate-${i}`, send, probe, isWaiting);
    if (i >= 5) latencies.push(latency);
  }
  return [
    [`per step, 20-step chain, ${label}`, fmt(pct(perStep, 50)), fmt(pct(perStep, 95)), `ms/step (this process's CPU ${fmt((cpu.user + cpu.system) / 1000 / (runs * STEPS))} ms/step)`],
    [`workflows/s, 50 at once, ${label}`, perSecond.toFixed(0), "", "runs/s"],
    [`signal → resumed, ${label}`, fmt(pct(latencies, 50)), fmt(pct(latencies, 95)), `ms (p99 ${fmt(pct(latencies, 99))}; ${latencies.length} resumes)`],
  ];
}

type Query = (typeof import("@/lib/executor/store"))["query"];
const waitingIn = (query: Query) => async (k: string) => {
  const [r] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_runs WHERE status = 'waiting' AND json_extract(event, '$.data.k') = ?", [k]);
  return Number(r?.n) > 0;
};

/** In-process, as Gatehouse's own app runs: signed, its client's embeddedFetch, startExecutor's defaults. */
export async function inProcessRows(): Promise<Row[]> {
  const { getEnv } = await import("@/lib/env");
  const { startExecutor, stopExecutor } = await import("@/lib/executor");
  const { query } = await import("@/lib/executor/store");
  const { getExecutorKey, ownSigningKey } = await import("@/lib/security/executor-key");
  const { embeddedFetch } = await import("@/inngest/client");
  const origin = getEnv().publicUrl;
  const probe: Probe = { chainDone: new Map(), resumed: new Map(), onResumed: new Map() };
  const inngest = new Inngest({
    id: "bench-users",
    isDev: false,
    signingKey: ownSigningKey(),
    eventKey: getExecutorKey(),
    baseUrl: origin,
    fetch: embeddedFetch(origin),
    checkpointing: true,
  });
  const serve = serveEdge({ client: inngest, functions: functions(inngest, probe) }) as (r: Request) => Promise<Response>;
  // After the measures, one resumed call is copied as the executor made it, for the SDK's floor (sdkFloorRows).
  let copy: ((request: Request) => void) | null = null;
  const handler = (request: Request) => {
    copy?.(request.clone());
    return serve(request);
  };
  // Another URL than Gatehouse's own /api/inngest (not served here); told to checkpoint, as the own app is.
  await startExecutor({ apps: [{ url: `${origin}/api/bench-users`, handler, signingKey: ownSigningKey(), checkpointing: true }], log: () => undefined });
  try {
    const send: Send = (name, data) => inngest.send({ name, data });
    const isWaiting = waitingIn(query);
    const rows = await measure("in-process (Inngest client + embeddedFetch, startExecutor defaults)", send, probe, isWaiting);
    // One more resume, whose call is copied for the floor.
    const k = "floor-copy";
    let resumeCall: Promise<ResumeCall> | undefined;
    await resumeOnce(k, send, probe, isWaiting, () => {
      copy = (request) => (resumeCall ??= request.text().then((body) => ({ url: request.url, headers: [...request.headers], body })));
    });
    copy = null;
    return [...rows, ...(await sdkFloorRows(await resumeCall!, k))];
  } finally {
    await stopExecutor();
  }
}

/**
 * What the SDK alone costs on the resume path, with nothing of Gatehouse's in it: the floor under "signal → resumed".
 * - the serve handler given the executor's own resumed call (copied above; signed, its state: the first step's result
 *   and the waited-for event; built as the executor builds it), from the call to the step after the wait starting: no
 *   database, no executor; the function's checkpoints go to a fetch that answers 200 at once;
 * - `inngest.send()` from the call to its `fetch` being called, which answers at once as the event API would.
 */
/** `k`: the run the copied call resumes (its event's `data.k`), which the replayed step records its start under. */
async function sdkFloorRows(resumeCall: ResumeCall, k: string): Promise<Row[]> {
  const { ownSigningKey } = await import("@/lib/security/executor-key");
  const { BufferedRequest } = await import("@/lib/executor/protocol");
  const probe: Probe = { chainDone: new Map(), resumed: new Map(), onResumed: new Map() };
  let fetched = 0;
  const answer = async (input: RequestInfo | URL) => {
    fetched = performance.now();
    const url = String(input instanceof Request ? input.url : input);
    return Response.json(url.includes("/e/") ? { ids: ["x"], status: 200 } : {}, { status: 200 });
  };
  // The same app id and functions as the measured app, so the copied call names a function this client serves.
  const inngest = new Inngest({ id: "bench-users", isDev: false, signingKey: ownSigningKey(), eventKey: "floor", baseUrl: "http://floor.invalid", fetch: answer as typeof fetch, checkpointing: true });
  const serve = serveEdge({ client: inngest, functions: functions(inngest, probe) }) as (r: Request) => Promise<Response>;
  const toStep: number[] = [];
  for (let i = 0; i < 330; i++) {
    probe.resumed.delete(k);
    // As the executor hands it over: its body the string in memory (protocol.ts BufferedRequest).
    const request = new BufferedRequest(resumeCall.url, { method: "POST", headers: resumeCall.headers }, resumeCall.body);
    const t0 = performance.now();
    const response = await serve(request);
    if (!response.ok || !probe.resumed.has(k)) throw new Error(`the copied resumed call did not resume (${response.status}): ${await response.text()}`);
    if (i >= 30) toStep.push(probe.resumed.get(k)! - t0);
  }
  const toFetch: number[] = [];
  for (let i = 0; i < 330; i++) {
    const t0 = performance.now();
    await inngest.send({ name: "users/go", data: { k: `floor-${i}` } });
    if (i >= 30) toFetch.push(fetched - t0);
  }
  return [
    [`the SDK alone: its serve handler, resumed call → step after the wait`, fmt(pct(toStep, 50)), fmt(pct(toStep, 95)), `ms (the executor's own resumed call replayed ${toStep.length}×; no database, checkpoints answered at once)`],
    [`the SDK alone: inngest.send() → its fetch called`, fmt(pct(toFetch, 50)), fmt(pct(toFetch, 95)), `ms (${toFetch.length} sends; the answer given at once)`],
  ];
}

/** `npm run worker` in its own process (its defaults, --checkpointing), driving an app in this process over HTTP. */
export async function workerRows(): Promise<Row[]> {
  const { getEnv } = await import("@/lib/env");
  const { query } = await import("@/lib/executor/store");
  const { getExecutorKey, ownSigningKey } = await import("@/lib/security/executor-key");
  const probe: Probe = { chainDone: new Map(), resumed: new Map(), onResumed: new Map() };
  let appHandler: ReturnType<typeof serveNode> | undefined;
  const app = http.createServer((req, res) => (appHandler ? void appHandler(req, res) : void res.writeHead(503).end()));
  app.keepAliveTimeout = 120_000;
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  const serveUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/api/inngest`;
  const root = path.resolve(import.meta.dirname, "..");
  const env: NodeJS.ProcessEnv = { ...process.env, GATEHOUSE_DATA_DIR: getEnv().dataDir, LOG_LEVEL: "error" };
  for (const k of Object.keys(env)) if (k.startsWith("INNGEST_")) delete env[k];
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", path.join(root, "scripts", "worker.ts"), "--port", "0", "--checkpointing", "--app", serveUrl], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Its first sync finds no app yet (503) and says so: shown only if the worker does not start.
  let errors = "";
  child.stderr!.on("data", (d: Buffer) => (errors += d.toString()));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /READY (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.once("exit", (code) => reject(new Error(`worker exited ${code}: ${out}${errors}`)));
    });
    const origin = `http://127.0.0.1:${port}`;
    const inngest = new Inngest({ id: "bench-worker", isDev: false, signingKey: ownSigningKey(), eventKey: getExecutorKey(), baseUrl: origin, checkpointing: true });
    appHandler = serveNode({ client: inngest, functions: functions(inngest, probe) });
    // The worker's first sync found no app yet (503) and retries with backoff: wait until the functions are registered.
    for (;;) {
      const [row] = await query<{ functions: string }>("SELECT functions FROM executor_apps WHERE url = ? AND last_error IS NULL", [serveUrl]);
      if (row && (JSON.parse(row.functions) as unknown[]).length === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return await measure("standalone worker over HTTP (npm run worker defaults)", (name, data) => inngest.send({ name, data }), probe, waitingIn(query));
  } finally {
    child.kill("SIGTERM");
    app.closeAllConnections();
    app.close();
  }
}
