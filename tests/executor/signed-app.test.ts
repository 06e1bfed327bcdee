import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { bearerMatchesSigningKey, Executor, handleCheckpointRequest, handleEventRequest, hashSigningKey, signRequest } from "@/lib/executor";
import { resetEnvCache } from "@/lib/env";
import { appBearerAccepted, executorTargetFor, getExecutorKey } from "@/lib/security/executor-key";
import { waitFor, waitForRuns } from "./harness";

/**
 * Request signing as Inngest does it: a separate plain-Node Inngest app in signed mode (isDev: false with a signing
 * key, tests/fixtures/inngest-app/signed-server.ts) is synced and run by an executor that signs with that key; the
 * app's checkpoint calls back carry the hashed-key bearer, and the executor's endpoint takes exactly that. A wrong key
 * is refused by the app, and the executor says why.
 */
const KEY = `signkey-prod-${"ab12".repeat(16)}`;
const WRONG = `signkey-prod-${"cd34".repeat(16)}`;

let executorServer: http.Server;
let origin: string;
let fixture: ChildProcess;
let fixtureLog = "";
let appUrl: string;
/** Authorization headers the app sent with its checkpoint calls, and how they were answered. */
const checkpointAuth: { header: string | null; status: number }[] = [];
let executor: Executor | undefined;

beforeAll(async () => {
  // The executor's side: event API and checkpoint API, the latter only for the hashed-key bearer of KEY.
  executorServer = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    let response: Response;
    if (req.url?.startsWith("/v1/checkpoint/")) {
      const header = request.headers.get("authorization");
      // As app/v1/checkpoint does (appBearerAccepted), plus the test key of the first app.
      const ok = bearerMatchesSigningKey(header, [KEY]) || appBearerAccepted(header);
      response = ok ? await handleCheckpointRequest(request) : Response.json({ error: "bad bearer" }, { status: 401 });
      checkpointAuth.push({ header, status: response.status });
    } else if (req.url?.startsWith("/e/")) {
      response = await handleEventRequest(request);
    } else {
      response = new Response("not found", { status: 404 });
    }
    res.statusCode = response.status;
    response.headers.forEach((v, k) => res.setHeader(k, v));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((r) => executorServer.listen(0, "127.0.0.1", r));
  origin = `http://127.0.0.1:${(executorServer.address() as AddressInfo).port}`;

  const started = await spawnSignedApp(KEY);
  fixture = started.child;
  appUrl = started.url;
});

/** Start tests/fixtures/inngest-app/signed-server.ts in its own process, in signed mode with `key`. */
async function spawnSignedApp(key: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join("tests", "fixtures", "inngest-app", "signed-server.ts"), "0", origin, key], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, INNGEST_DEV: "", INNGEST_SIGNING_KEY: "", INNGEST_BASE_URL: "" },
  });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`signed app did not start: ${out}`)), 30_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      fixtureLog += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.stderr!.on("data", (d: Buffer) => (fixtureLog += d.toString()));
  });
  return { child, url: `http://127.0.0.1:${port}/api/inngest` };
}
const children: ChildProcess[] = [];
afterEach(async () => {
  await executor?.stop();
  executor = undefined;
});
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await new Promise((r) => executorServer?.close(r));
});

const start = async (keys: { signingKey?: string; signingKeyFallback?: string }, logs: string[] = []) => {
  executor = new Executor({
    apps: [{ url: appUrl, checkpointing: true, ...keys }],
    pollMs: 50,
    leaseMs: 2000,
    backoff: () => 20,
    log: (_level, message) => logs.push(message),
  });
  await executor.start();
  return executor;
};

const send = (event: unknown) => fetch(`${origin}/e/key`, { method: "POST", body: JSON.stringify(event) });

describe("an Inngest app in signed mode", () => {
  it("syncs and runs a function when the executor signs with its key; checkpoints come back with the hashed-key bearer", async () => {
    const ex = await start({ signingKey: KEY });
    const status = await ex.status();
    expect(status.apps[0]).toMatchObject({ appId: "signed-app", functions: 1, error: null });
    await send({ name: "signed/steps", data: { n: 21 } });
    const [run] = await waitForRuns("steps", { where: (r) => r.event.data.n === 21 });
    expect(run).toMatchObject({ status: "completed", output: { a: 21, b: 42 } });
    // The app checkpointed its steps with Authorization: Bearer signkey-prod-<sha256 of the key's bytes>.
    expect(checkpointAuth.length).toBeGreaterThan(0);
    expect(checkpointAuth.every((c) => c.header === `Bearer ${hashSigningKey(KEY)}` && c.status === 200)).toBe(true);
    expect(hashSigningKey(KEY)).toMatch(/^signkey-prod-[0-9a-f]{64}$/);
  });

  it("a wrong signing key is refused by the app at sync; the executor stores and logs why, naming the signature", async () => {
    const logs: string[] = [];
    const ex = await start({ signingKey: WRONG }, logs);
    const [app] = (await ex.status()).apps;
    expect(app?.error).toMatch(/refused the sync \(401\): it rejected the executor's request signature \(X-Inngest-Signature\)/);
    expect(logs.join("\n")).toMatch(/X-Inngest-Signature/);
    // The app's SDK logged the failed verification too.
    await waitFor(async () => /Signature validation failed/.test(fixtureLog), { what: "the app to log the refused signature" });
  });

  it("a run called with a wrong signature fails with an error that says the app refused the executor's signature", async () => {
    await start({ signingKey: WRONG });
    // The functions are known from the earlier sync; the call itself is what the app refuses.
    await send({ name: "signed/steps", data: { n: 5 } });
    const [run] = await waitForRuns("steps", { where: (r) => r.event.data.n === 5 });
    expect(run?.status).toBe("failed");
    expect((run?.error as { message: string }).message).toMatch(/rejected the call \(401\): it refused the executor's X-Inngest-Signature/);
  });

  it("with a wrong key and the right one as fallback, the executor retries with the fallback and the app syncs and runs", async () => {
    const ex = await start({ signingKey: WRONG, signingKeyFallback: KEY });
    expect((await ex.status()).apps[0]).toMatchObject({ appId: "signed-app", error: null });
    await send({ name: "signed/steps", data: { n: 7 } });
    const [run] = await waitForRuns("steps", { where: (r) => r.event.data.n === 7 });
    expect(run).toMatchObject({ status: "completed", output: { a: 7, b: 14 } });
  });

  it("an unsigned executor is refused too, and told to give it the signing key", async () => {
    const ex = await start({});
    expect((await ex.status()).apps[0]?.error).toMatch(/GATEHOUSE_EXECUTOR_SIGNING_KEY/);
  });
});

describe("one secret: the executor key is the signing key", () => {
  it("an app with INNGEST_SIGNING_KEY=signkey-prod-<executor key> syncs, runs and checkpoints with Gatehouse's own executor target", async () => {
    const own = await spawnSignedApp(`signkey-prod-${getExecutorKey()}`);
    const before = checkpointAuth.length;
    // executorTargetFor is what `npm run worker` and the embedded executor give GATEHOUSE_EXECUTOR_APPS and --app URLs.
    executor = new Executor({ apps: [{ ...executorTargetFor(own.url), checkpointing: true }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {} });
    await executor.start();
    const status = await executor.status();
    expect(status.apps.find((a) => a.url === own.url)).toMatchObject({ appId: "signed-app", error: null });
    await send({ name: "signed/steps", data: { n: 50 } });
    const [run] = await waitForRuns("steps", { where: (r) => r.event.data.n === 50 });
    expect(run).toMatchObject({ status: "completed", output: { a: 50, b: 100 } });
    const calls = checkpointAuth.slice(before);
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.every((c) => c.header === `Bearer ${hashSigningKey(`signkey-prod-${getExecutorKey()}`)}` && c.status === 200)).toBe(true);
  });

  it("the checkpoint endpoint takes the hashed GATEHOUSE_EXECUTOR_SIGNING_KEY and its fallback, not other keys", () => {
    process.env.GATEHOUSE_EXECUTOR_SIGNING_KEY = KEY;
    process.env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK = `signkey-prod-${"ef56".repeat(16)}`;
    resetEnvCache();
    try {
      expect(appBearerAccepted(`Bearer ${hashSigningKey(KEY)}`)).toBe(true);
      expect(appBearerAccepted(`Bearer ${hashSigningKey(`signkey-prod-${"ef56".repeat(16)}`)}`)).toBe(true);
      expect(appBearerAccepted(`Bearer ${hashSigningKey(`signkey-prod-${getExecutorKey()}`)}`)).toBe(true);
      expect(appBearerAccepted(`Bearer ${hashSigningKey(WRONG)}`)).toBe(false);
      expect(appBearerAccepted(null)).toBe(false);
      expect(executorTargetFor("http://127.0.0.1:1/api/inngest")).toMatchObject({ signingKey: KEY, signingKeyFallback: `signkey-prod-${"ef56".repeat(16)}` });
    } finally {
      delete process.env.GATEHOUSE_EXECUTOR_SIGNING_KEY;
      delete process.env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK;
      resetEnvCache();
    }
  });
});

describe("the signature", () => {
  it("is t=<unix seconds>&s=<HMAC-SHA256 hex> over the body and the timestamp, keyed with the key without its prefix", async () => {
    const { createHmac } = await import("node:crypto");
    const body = '{"a":1}';
    const now = 1_700_000_000_000;
    const expected = createHmac("sha256", "ab12".repeat(16)).update(body + "1700000000").digest("hex");
    expect(signRequest({ body, signingKey: KEY, now })).toBe(`t=1700000000&s=${expected}`);
  });

  it("the bearer check takes only the hashed form of a configured key", () => {
    expect(bearerMatchesSigningKey(`Bearer ${hashSigningKey(KEY)}`, [undefined, KEY])).toBe(true);
    expect(bearerMatchesSigningKey(`Bearer ${hashSigningKey(WRONG)}`, [KEY])).toBe(false);
    expect(bearerMatchesSigningKey(`Bearer ${KEY}`, [KEY])).toBe(false);
    expect(bearerMatchesSigningKey(null, [KEY])).toBe(false);
  });
});
