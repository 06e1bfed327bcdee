import http from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { getEnv } from "@/lib/env";
import { appBearerAccepted, EXECUTOR_KEY_HEADER, executorTargetFor, hasExecutorKey } from "@/lib/security/executor-key";
import {
  CHECKPOINT_PATH,
  configuredAppUrls,
  handleCheckpointBody,
  startExecutor,
  stopExecutor,
  type Executor,
} from "@/lib/executor";
import { eventKeyFromPath, handleKeyedEventBody } from "@/lib/security/event-endpoint";
import { workerEnvRefusal, workerKeyLines } from "@/lib/security/worker-start";

/**
 * `npm run worker` — the executor on its own, like `inngest dev -u <url>`:
 *   npm run worker -- --app http://127.0.0.1:4000/api/inngest [--app …] [--port 8288]
 * Drives the apps given with --app and in GATEHOUSE_EXECUTOR_APPS (default: Gatehouse's own /api/inngest), and serves
 * the event API (POST /e/:key) and the checkpoint API (POST /v1/checkpoint/:runId/async) on --port, so those apps
 * can send events and checkpoint steps (point them at it with INNGEST_DEV=<origin> and INNGEST_EVENT_KEY=<executor key>;
 * it prints both at start, and refuses to start with an app's INNGEST_EVENT_KEY / _SIGNING_KEY / _BASE_URL). With
 * --checkpointing the --app apps are told to checkpoint (their checkpoint calls must reach this worker or another
 * endpoint on this database).
 * Several workers may share one database: each run is driven by one worker at a time.
 */
const { values } = parseArgs({
  options: {
    app: { type: "string", multiple: true, short: "u" },
    port: { type: "string", default: "8288" },
    host: { type: "string", default: "127.0.0.1" },
    "lease-ms": { type: "string" },
    "poll-ms": { type: "string" },
    "worker-id": { type: "string" },
    checkpointing: { type: "boolean", default: false },
  },
});

function positive(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive whole number (got ${value})`);
  return n;
}

const env = getEnv();
// The worker is the Inngest server for its apps: with an app's INNGEST_* settings it would drive them but refuse every
// event (Inngest mode), so it says why and stops instead.
const refusal = workerEnvRefusal(env);
if (refusal) {
  console.error(refusal);
  process.exit(2);
}
const urls = [...new Set([...(values.app ?? []), ...configuredAppUrls()])];
if (urls.length === 0) urls.push(`${env.publicUrl}/api/inngest`);
for (const url of urls) {
  if (!/^https?:\/\//.test(url)) throw new Error(`--app must be an http(s) serve URL (got ${url})`);
}

const leaseMs = positive("lease-ms", values["lease-ms"]);
const pollMs = positive("poll-ms", values["poll-ms"]);
let executor: Executor | undefined;

/**
 * The body of a call, read off the socket only once the shared handlers have accepted its key (they call this), or
 * null past `limit`: refused by Content-Length before a byte is read, or as soon as it passes the cap (the rest is
 * never read). A caller without the key never has a byte of it held here. No web stream or `Request` is built.
 */
function bodyOf(req: http.IncomingMessage): (limit: number) => Promise<string | null> {
  return (limit) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size <= limit) return void chunks.push(chunk);
        req.off("data", onData).off("end", onEnd).pause();
        resolve(null);
      };
      const onEnd = () => resolve(Buffer.concat(chunks, size).toString("utf8"));
      req.on("data", onData).on("end", onEnd).once("error", reject);
    });
  };
}

const server = http.createServer(async (req, res) => {
  let response: Response;
  const pathname = new URL(req.url ?? "/", "http://worker").pathname;
  const key = req.method === "POST" ? eventKeyFromPath(pathname) : undefined;
  if (key !== undefined) {
    // The same key check as the Next route /e/:key: only the executor key is an event key.
    response = await handleKeyedEventBody({ key, read: bodyOf(req) }).catch(() =>
      Response.json({ error: "The event could not be stored", status: 500 }, { status: 500 }),
    );
  } else if (req.method === "POST" && CHECKPOINT_PATH.test(pathname)) {
    response = !appBearerAccepted(String(req.headers.authorization ?? ""))
      ? Response.json({ error: "Checkpoint calls need the executor key: set INNGEST_SIGNING_KEY=signkey-dev-<executor key>", status: 401 }, { status: 401 })
      : await handleCheckpointBody({ url: `http://worker${req.url}`, method: "POST", read: bodyOf(req) }).catch(() => Response.json({ error: "The checkpoint could not be stored", status: 500 }, { status: 500 }));
  } else if (req.method === "GET" && pathname === "/health") {
    // Liveness for anyone; the worker id, apps and leases only with the executor key.
    const detailed = executor && hasExecutorKey(String(req.headers[EXECUTOR_KEY_HEADER] ?? ""));
    response = Response.json(detailed ? await executor!.status() : { ok: !!executor });
  } else {
    response = Response.json({ error: "not found" }, { status: 404 });
  }
  // A body left unread (refused, or past a limit) is not drained: the connection closes after the answer.
  if (!req.complete) res.shouldKeepAlive = false;
  res.statusCode = response.status;
  response.headers.forEach((v, k) => res.setHeader(k, v));
  res.end(Buffer.from(await response.arrayBuffer()));
});

await new Promise<void>((resolve) => server.listen(Number(values.port), values.host, resolve));
const port = (server.address() as AddressInfo).port;
executor = await startExecutor({
  apps: urls.map((url) => ({ ...executorTargetFor(url), ...(values.checkpointing ? { checkpointing: true } : {}) })),
  workerId: values["worker-id"],
  leaseMs,
  pollMs,
  // Another process (the web server without an executor of its own) stores the events that resume runs: seen at once.
  watchCommits: true,
});
const status = await executor.status();
const origin = `http://${values.host}:${port}`;
console.log(`worker ${executor.workerId} · events at ${origin}/e/<key>, checkpoints at /v1/checkpoint/<run>/async`);
for (const line of workerKeyLines(origin, env)) console.log(line);
for (const app of status.apps) {
  console.log(`  ${app.url} → ${app.error ? `sync failed: ${app.error} (retrying)` : `${app.appId}, ${app.functions} functions`}`);
}
console.log(`READY ${port}`);

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(1);
    stopping = true;
    void stopExecutor().then(() => {
      server.close();
      process.exit(0);
    });
  });
}
