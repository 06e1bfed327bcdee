import { afterEach, describe, expect, it } from "vitest";
import { embeddedFetch } from "@/inngest/client";
import { getEnv } from "@/lib/env";
import { hashSigningKey } from "@/lib/executor";
import { getExecutorKey, ownSigningKey } from "@/lib/security/executor-key";

/*
 * Gatehouse's own client in embedded mode (inngest/client.ts embeddedFetch): the SDK sends events and checkpoints as
 * a string body, which reaches the executor's handlers as is, with the checks of their routes (the event key, the
 * hashed-key bearer) — no `Request` is built around it and no stream is read back (on Node 20 each costs ~0.1 ms).
 */

const RealRequest = globalThis.Request;
afterEach(() => {
  globalThis.Request = RealRequest;
});

/** Counts `Request`s built from here on. */
function countingRequests(): () => number {
  let n = 0;
  globalThis.Request = class extends RealRequest {
    constructor(...args: ConstructorParameters<typeof Request>) {
      super(...args);
      n++;
    }
  } as typeof Request;
  return () => n;
}

describe("embeddedFetch hands the SDK's string bodies to the handlers", () => {
  it("stores an event sent to /e/<executor key>, refuses another key, and builds no Request", async () => {
    const origin = getEnv().publicUrl;
    const fetch = embeddedFetch(origin);
    const built = countingRequests();
    const body = JSON.stringify([{ name: "probe/embedded-fetch", data: { n: 1 } }]);
    const sent = await fetch(`${origin}/e/${getExecutorKey()}`, { method: "POST", body, headers: { "content-type": "application/json" } });
    expect(sent.status).toBe(200);
    expect(await sent.json()).toMatchObject({ status: 200, ids: [expect.any(String)] });
    const refused = await fetch(`${origin}/e/not-the-key`, { method: "POST", body });
    expect(refused.status).toBe(401);
    expect(built()).toBe(0);
  });

  it("takes a checkpoint only with the app's hashed-key bearer, and builds no Request", async () => {
    const origin = getEnv().publicUrl;
    const fetch = embeddedFetch(origin);
    const built = countingRequests();
    const runId = "01J0000000000000000000042";
    const body = JSON.stringify({ run_id: runId, fn_id: "gatehouse-f", qi_id: "worker-x/1", steps: [] });
    const url = `${origin}/v1/checkpoint/${runId}/async`;
    const wrong = await fetch(url, { method: "POST", body, headers: { authorization: `Bearer ${hashSigningKey(`signkey-prod-${"ab".repeat(32)}`)}` } });
    expect(wrong.status).toBe(401);
    const right = await fetch(url, { method: "POST", body, headers: { Authorization: `Bearer ${hashSigningKey(ownSigningKey())}` } });
    // Past the bearer, the checkpoint handler itself answers: no such run.
    expect(right.status).toBe(404);
    expect(await right.text()).toContain(`Run ${runId} not found`);
    expect(built()).toBe(0);
  });
});
