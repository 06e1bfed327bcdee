import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { bearerMatchesSigningKey, Executor, handleCheckpointRequest, handleEventRequest, hashSigningKey, signRequest } from "@/lib/executor";
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
      response = bearerMatchesSigningKey(header, [KEY]) ? await handleCheckpointRequest(request) : Response.json({ error: "bad bearer" }, { status: 401 });
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

  fixture = spawn(process.execPath, ["--import", "tsx", path.join("tests", "fixtures", "inngest-app", "signed-server.ts"), "0", origin, KEY], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, INNGEST_DEV: "", INNGEST_SIGNING_KEY: "", INNGEST_BASE_URL: "" },
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`signed app did not start: ${fixtureLog}`)), 30_000);
    fixture.stdout!.on("data", (d: Buffer) => {
      fixtureLog += d.toString();
      const m = /LISTENING (\d+)/.exec(fixtureLog);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    fixture.stderr!.on("data", (d: Buffer) => (fixtureLog += d.toString()));
  });
  appUrl = `http://127.0.0.1:${port}/api/inngest`;
});
afterEach(async () => {
  await executor?.stop();
  executor = undefined;
});
afterAll(async () => {
  fixture?.kill("SIGKILL");
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
