import { describe, expect, it, vi } from "vitest";
import type { FetchHandler } from "@/lib/executor";

/*
 * /api/inngest has the executor's X-Inngest-Signature verified once, by the SDK (which runs signed in embedded mode),
 * not first by the route and then again by the SDK: each check parsed, canonicalised and hashed the whole call. The
 * route still refuses what it can before reading the body; a wrongly signed call is still a 401.
 */

vi.mock("@/lib/executor/signing", async (importOriginal) => {
  const actual = await importOriginal<typeof import("@/lib/executor/signing")>();
  return { ...actual, verifyRequestSignature: vi.fn(actual.verifyRequestSignature) };
});

const SERVE = "http://127.0.0.1:3000/api/inngest";

async function call(key: string): Promise<Response> {
  const { canonicalBody, signRequest } = await import("@/lib/executor/signing");
  const now = Date.now();
  const event = { name: "gatehouse/health.ping", data: { from: "once" }, id: "01J0000000000000000000000", ts: now };
  const body = canonicalBody({
    event,
    events: [event],
    steps: {},
    ctx: { run_id: "01J0000000000000000000001", attempt: 0, disable_immediate_execution: true, use_api: false, stack: { stack: [], current: 0 } },
    version: 2,
  });
  const { POST } = (await import("@/app/api/inngest/route")) as unknown as { POST: FetchHandler };
  return POST(
    new Request(`${SERVE}?fnId=gatehouse-health-check&stepId=step`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "x-inngest-signature": signRequest({ body, signingKey: key, now }) },
    }),
  );
}

describe("/api/inngest verifies a call's signature once", () => {
  it("a rightly signed call runs without the route verifying it a second time; a wrongly signed one is still a 401", async () => {
    const signing = await import("@/lib/executor/signing");
    const { ownSigningKey } = await import("@/lib/security/executor-key");
    const verify = vi.mocked(signing.verifyRequestSignature);

    const ok = await call(ownSigningKey());
    expect([200, 206]).toContain(ok.status);
    expect(ok.headers.get("x-inngest-sdk")).toBeTruthy();
    expect(verify).not.toHaveBeenCalled();

    const wrong = await call(`signkey-prod-${"cd34".repeat(16)}`);
    expect(wrong.status).toBe(401);
    expect(verify).not.toHaveBeenCalled();
  });
});
