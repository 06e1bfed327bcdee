import { afterAll, describe, expect, it } from "vitest";
import { canonicalBody, signRequest } from "@/lib/executor/signing";
import { Executor, hashSigningKey, sendEvents, stopExecutor, type FetchHandler } from "@/lib/executor";
import { resetEnvCache } from "@/lib/env";
import { appBearerAccepted, getExecutorKey, ownSigningKey } from "@/lib/security/executor-key";
import { startServer, waitForRuns } from "./harness";

/*
 * Gatehouse's own app runs in signed mode in embedded mode, as on Inngest Cloud: the signing key is made from the
 * executor key (one secret), the real serve handler (app/api/inngest) verifies X-Inngest-Signature and refuses anything
 * else, and a run driven over HTTP with the right key completes (its checkpoints carry the hashed-key bearer).
 */

afterAll(async () => {
  await stopExecutor();
});

const WRONG = `signkey-prod-${"cd34".repeat(16)}`;
const SERVE = "http://127.0.0.1:3000/api/inngest";

async function route() {
  const r = await import("@/app/api/inngest/route");
  return { POST: r.POST as unknown as FetchHandler, PUT: r.PUT as unknown as FetchHandler, GET: r.GET as unknown as FetchHandler };
}

/** A call to run the health-check function, as the executor makes it; signed with `key` at `now` unless null. */
function runCall(key: string | null, now = Date.now()): Request {
  const body = canonicalBody({
    event: { name: "gatehouse/health.ping", data: { from: "forged" }, id: "01J0000000000000000000000", ts: now },
    events: [{ name: "gatehouse/health.ping", data: { from: "forged" }, id: "01J0000000000000000000000", ts: now }],
    steps: {},
    ctx: { run_id: "01J0000000000000000000001", attempt: 0, disable_immediate_execution: true, use_api: false, stack: { stack: [], current: 0 } },
    version: 2,
  });
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key) headers["x-inngest-signature"] = signRequest({ body, signingKey: key, now });
  return new Request(`${SERVE}?fnId=gatehouse-health-check&stepId=step`, { method: "POST", body, headers });
}

function syncCall(key: string | null): Request {
  const body = canonicalBody({ url: SERVE });
  const headers: Record<string, string> = { "content-type": "application/json", "x-inngest-sync-kind": "in_band", "x-inngest-server-kind": "cloud" };
  if (key) headers["x-inngest-signature"] = signRequest({ body, signingKey: key });
  return new Request(SERVE, { method: "PUT", body, headers });
}

describe("Gatehouse's own serve handler in signed mode", () => {
  it("the signing key is the executor key, so there is one secret", () => {
    const key = getExecutorKey();
    expect(ownSigningKey()).toBe(/^(?:[0-9a-f]{2})+$/i.test(key) ? `signkey-prod-${key}` : expect.stringMatching(/^signkey-prod-[0-9a-f]{64}$/));
  });

  it("a GATEHOUSE_EXECUTOR_KEY that is not hex is hashed to hex first, so the app's bearer is not the hash of nothing", () => {
    process.env.GATEHOUSE_EXECUTOR_KEY = "correct horse battery staple: not hex at all";
    resetEnvCache();
    try {
      expect(ownSigningKey()).toMatch(/^signkey-prod-[0-9a-f]{64}$/);
      expect(appBearerAccepted(`Bearer ${hashSigningKey(ownSigningKey())}`)).toBe(true);
      // Used as it is, the key would hash (as hex) to the hash of zero bytes: a bearer anyone can compute.
      const naive = hashSigningKey(`signkey-prod-${process.env.GATEHOUSE_EXECUTOR_KEY}`);
      expect(naive).toBe(hashSigningKey("signkey-prod-"));
      expect(appBearerAccepted(`Bearer ${naive}`)).toBe(false);
    } finally {
      delete process.env.GATEHOUSE_EXECUTOR_KEY;
      resetEnvCache();
    }
  });

  it("refuses a call to run a function that is unsigned, signed with another key, or signed too long ago", async () => {
    const { POST } = await route();
    for (const request of [runCall(null), runCall(WRONG), runCall(ownSigningKey(), Date.now() - 10 * 60_000)]) {
      const response = await POST(request);
      expect(response.status).toBe(401);
    }
  });

  it("refuses an unsigned or wrongly signed sync, and syncs in band with the right signature", async () => {
    const { PUT } = await route();
    const unsigned = await PUT(syncCall(null));
    expect(unsigned.status).toBe(401);
    expect(await unsigned.text()).toMatch(/X-Inngest-Signature/i);
    expect((await PUT(syncCall(WRONG))).status).toBe(401);
    const signed = await PUT(syncCall(ownSigningKey()));
    expect(signed.status).toBe(200);
    expect(await signed.json()).toMatchObject({ app_id: "gatehouse", functions: expect.arrayContaining([expect.objectContaining({ id: "gatehouse-health-check" })]) });
  });

  it("an executor with the wrong key is refused at sync and says why; with the app's key a run over HTTP completes", async () => {
    const { GET, POST, PUT } = await route();
    const server = await startServer();
    server.setHandler((request) => ({ GET, POST, PUT })[request.method as "GET" | "POST" | "PUT"](request));
    const wrong = new Executor({ apps: [{ url: server.serveUrl, signingKey: WRONG }], pollMs: 50, log: () => {} });
    try {
      await stopExecutor();
      await wrong.start();
      expect((await wrong.status()).apps[0]!.error).toMatch(/signature|signing key/i);
    } finally {
      await wrong.stop();
    }
    const executor = new Executor({ apps: [{ url: server.serveUrl, signingKey: ownSigningKey() }], pollMs: 50, log: () => {} });
    try {
      await executor.start();
      expect((await executor.status()).apps[0]).toMatchObject({ appId: "gatehouse", error: null });
      await sendEvents({ name: "gatehouse/health.ping", data: { from: "signed" } });
      const runs = await waitForRuns("health-check", { where: (r) => JSON.stringify(r.output).includes("signed") });
      expect(runs.map((r) => r.output)).toContainEqual(expect.objectContaining({ ok: true, ping: { from: "signed" } }));
    } finally {
      await executor.stop();
      await server.close();
    }
  });

  it("the app's checkpoint calls back are taken with its hashed-key bearer only", async () => {
    const checkpoint = await import("@/app/v1/checkpoint/[runId]/async/route");
    const call = (bearer: string) =>
      checkpoint.POST(
        new Request("http://127.0.0.1:3000/v1/checkpoint/01J0000000000000000000009/async", {
          method: "POST",
          body: JSON.stringify({ run_id: "01J0000000000000000000009", steps: [] }),
          headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
        }),
      );
    expect((await call(hashSigningKey(WRONG))).status).toBe(401);
    expect((await call(hashSigningKey(ownSigningKey()))).status).not.toBe(401);
  });
});
