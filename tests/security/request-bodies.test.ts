import { afterEach, describe, expect, it, vi } from "vitest";
import * as inngestRoute from "@/app/api/inngest/route";
import * as webhookRoute from "@/app/api/github/webhook/route";
import * as eventsRoute from "@/app/e/[key]/route";
import * as checkpointRoute from "@/app/v1/checkpoint/[runId]/async/route";
import * as authRoute from "@/app/api/auth/[...nextauth]/route";
import { unverifiedBytesInFlight } from "@/lib/body";
import { getEnv, resetEnvCache } from "@/lib/env";
import { hashSigningKey, signRequest } from "@/lib/executor";
import { canonicalBody } from "@/lib/executor/signing";
import { getExecutorKey, ownSigningKey } from "@/lib/security/executor-key";
import { config as proxyConfig } from "@/proxy";

/*
 * Issue #29, findings 3, 4 and 11: bodies read before the sender is known. The request bodies here are streams that
 * count what the server pulls from them, so each test sees how much of a body was read, not how long it took.
 */

const MiB = 1024 * 1024;
const CHUNK = 64 * 1024;
const SERVE = "http://127.0.0.1:3000/api/inngest";
const WEBHOOK_SECRET = "whsec-bodies-test-0123456789";
type Handler = (request: Request, context?: unknown) => Promise<Response>;
const POST = inngestRoute.POST as unknown as Handler;
const PUT = inngestRoute.PUT as unknown as Handler;
const noParams = { params: Promise.resolve({}) };

afterEach(() => {
  for (const name of ["GATEHOUSE_UNVERIFIED_BODY_BYTES", "GATEHOUSE_WEBHOOK_MAX_BYTES", "GATEHOUSE_MAX_BODY_BYTES", "GITHUB_APP_WEBHOOK_SECRET"]) {
    delete process.env[name];
  }
  resetEnvCache();
  vi.restoreAllMocks();
});

function setEnv(values: Record<string, string>) {
  Object.assign(process.env, values);
  resetEnvCache();
}

/**
 * A body of `total` bytes that is produced only as the server reads it; `pulled.bytes` is how much it read. With a
 * `hold`, it stops after `hold.after` bytes until `hold.release()` is called (a slow sender).
 */
function countedBody(total: number, hold?: { after: number }) {
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  const pulled = { bytes: 0 };
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (hold && pulled.bytes >= hold.after) await held;
        if (pulled.bytes >= total) return controller.close();
        pulled.bytes += CHUNK;
        controller.enqueue(new Uint8Array(CHUNK).fill(32));
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, pulled, release };
}

function streamed(url: string, method: string, body: ReadableStream<Uint8Array>, headers: Record<string, string>): Request {
  return new Request(url, { method, body, headers: { "content-type": "application/json", ...headers }, duplex: "half" } as RequestInit);
}

const freshButWrong = () => `t=${Math.round(Date.now() / 1000)}&s=${"ab".repeat(32)}`;
const webhookHeaders = { "x-github-event": "issue_comment", "x-github-delivery": "bodies-test", "x-hub-signature-256": `sha256=${"0".repeat(64)}` };

async function until(condition: () => boolean) {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe("hardening #29.3: bodies are not read before the caller can be checked", () => {
  it("hardening #29.3 a call to /api/inngest with a malformed or expired signature is refused before a byte of its body is read", async () => {
    for (const signature of ["t=1&s=00", `t=${Math.round(Date.now() / 1000)}&s=00`, `t=1&s=${"ab".repeat(32)}`, "garbage", `s=${"ab".repeat(32)}`]) {
      const { stream, pulled } = countedBody(200 * MiB);
      const response = await POST(streamed(`${SERVE}?fnId=gatehouse-health-check&stepId=step`, "POST", stream, { "x-inngest-signature": signature }));
      expect(response.status, signature).toBe(401);
      expect((await response.json()).error.code).toBe("unauthorized:executor");
      expect(pulled.bytes, signature).toBe(0);
    }
  });

  it("hardening #29.3 a call to /api/inngest with a well-formed signature is read only up to its cap (413), and a body under it that the signature does not sign is a 401", async () => {
    const { stream, pulled } = countedBody(60 * MiB);
    const response = await POST(streamed(SERVE, "POST", stream, { "x-inngest-signature": freshButWrong() }));
    expect(response.status).toBe(413);
    expect(pulled.bytes).toBeLessThanOrEqual(33 * MiB + CHUNK);
    const declared = await POST(
      new Request(SERVE, { method: "POST", body: "{}", headers: { "x-inngest-signature": freshButWrong(), "content-length": String(40 * MiB) } }),
    );
    expect(declared.status).toBe(413);
    const forged = await POST(new Request(SERVE, { method: "POST", body: canonicalBody({ event: {} }), headers: { "x-inngest-signature": freshButWrong() } }));
    expect(forged.status).toBe(401);
  });

  it("hardening #29.3 the event endpoint and the checkpoint API read nothing from a caller without the key, and cap a keyed caller's body", async () => {
    setEnv({ GATEHOUSE_MAX_BODY_BYTES: String(MiB) });
    const event = (key: string, stream: ReadableStream<Uint8Array>) =>
      eventsRoute.POST(streamed(`http://127.0.0.1:3000/e/${key}`, "POST", stream, {}), { params: Promise.resolve({ key }) });
    const stranger = countedBody(50 * MiB);
    expect((await event("guess", stranger.stream)).status).toBe(401);
    expect(stranger.pulled.bytes).toBe(0);
    const keyed = countedBody(50 * MiB);
    expect((await event(getExecutorKey(), keyed.stream)).status).toBe(413);
    expect(keyed.pulled.bytes).toBeLessThanOrEqual(MiB + CHUNK);

    const checkpoint = (bearer: string, stream: ReadableStream<Uint8Array>) =>
      checkpointRoute.POST(streamed("http://127.0.0.1:3000/v1/checkpoint/01J0000000000000000000009/async", "POST", stream, { authorization: `Bearer ${bearer}` }));
    const noKey = countedBody(50 * MiB);
    expect((await checkpoint("guess", noKey.stream)).status).toBe(401);
    expect(noKey.pulled.bytes).toBe(0);
    const withKey = countedBody(60 * MiB);
    expect((await checkpoint(hashSigningKey(ownSigningKey()), withKey.stream)).status).toBe(413);
    expect(withKey.pulled.bytes).toBeLessThanOrEqual(33 * MiB + CHUNK);
  });

  it("hardening #29.3 the sign-in endpoint reads at most 64 KiB of a form", async () => {
    for (const path of ["/api/auth/callback/local", "/api/auth/signin/github"]) {
      const { stream, pulled } = countedBody(20 * MiB);
      const response = await (authRoute.POST as unknown as Handler)(
        streamed(`http://127.0.0.1:3000${path}`, "POST", stream, { "content-type": "application/x-www-form-urlencoded" }),
      );
      expect(response.status, path).toBe(413);
      expect(pulled.bytes, path).toBeLessThanOrEqual(64 * 1024 + CHUNK);
    }
  });

  it("hardening #29.3 the proxy (whose requests Next copies the body of first) runs for pages only, not for the endpoints that take bodies", () => {
    // The matcher is one path pattern of the form "/(<regex>)"; as a regular expression it says which paths it takes.
    const matches = (path: string) => proxyConfig.matcher.some((m) => new RegExp(`^${m}$`).test(path));
    expect(matches("/runs/run_1")).toBe(true);
    expect(matches("/signin")).toBe(true);
    for (const path of ["/v1/checkpoint/01J0000000000000000000009/async", "/e/some-key", "/api/inngest", "/api/github/webhook"]) {
      expect(matches(path), path).toBe(false);
    }
  });
});

describe("hardening #29.4: webhook bodies and the budget of unverified bodies", () => {
  it("hardening #29.4 the GitHub webhook reads at most GATEHOUSE_WEBHOOK_MAX_BYTES (default 5 MiB) of a body before its signature is checked", async () => {
    setEnv({ GITHUB_APP_WEBHOOK_SECRET: WEBHOOK_SECRET });
    expect(getEnv().GATEHOUSE_WEBHOOK_MAX_BYTES).toBe(5 * MiB);
    const { stream, pulled } = countedBody(24 * MiB);
    const response = await webhookRoute.POST(streamed("http://127.0.0.1:3000/api/github/webhook", "POST", stream, webhookHeaders), noParams);
    expect(response.status).toBe(413);
    expect((await response.json()).error.message).toMatch(/GATEHOUSE_WEBHOOK_MAX_BYTES/);
    expect(pulled.bytes).toBeLessThanOrEqual(5 * MiB + CHUNK);

    const declared = countedBody(6 * MiB);
    const refused = await webhookRoute.POST(
      streamed("http://127.0.0.1:3000/api/github/webhook", "POST", declared.stream, { ...webhookHeaders, "content-length": String(6 * MiB) }),
      noParams,
    );
    expect(refused.status).toBe(413);
    expect(declared.pulled.bytes).toBe(0);

    setEnv({ GATEHOUSE_WEBHOOK_MAX_BYTES: String(MiB) });
    const lower = countedBody(3 * MiB);
    expect((await webhookRoute.POST(streamed("http://127.0.0.1:3000/api/github/webhook", "POST", lower.stream, webhookHeaders), noParams)).status).toBe(413);
    expect(lower.pulled.bytes).toBeLessThanOrEqual(MiB + CHUNK);
  });

  it("hardening #29.4 unverified bodies share one budget: past it a request is refused with 503 and Retry-After, and the budget is free again when they end", async () => {
    setEnv({ GITHUB_APP_WEBHOOK_SECRET: WEBHOOK_SECRET, GATEHOUSE_UNVERIFIED_BODY_BYTES: String(2 * MiB) });
    const url = "http://127.0.0.1:3000/api/github/webhook";
    // A slow sender with a wrong signature: 1.5 MiB sent, then it waits.
    const slow = countedBody(2 * MiB - CHUNK, { after: 1.5 * MiB });
    const pending = webhookRoute.POST(streamed(url, "POST", slow.stream, webhookHeaders), noParams);
    await until(() => unverifiedBytesInFlight() >= 1.5 * MiB);

    // One that announces more than is left is refused before a byte is read.
    const declared = countedBody(MiB);
    const busy = await webhookRoute.POST(streamed(url, "POST", declared.stream, { ...webhookHeaders, "content-length": String(MiB) }), noParams);
    expect(busy.status).toBe(503);
    expect(busy.headers.get("retry-after")).toBe("5");
    expect(declared.pulled.bytes).toBe(0);
    // A chunked one is stopped as soon as it would pass the budget, on any route that reads before it verifies.
    const chunked = countedBody(10 * MiB);
    const stopped = await POST(streamed(SERVE, "POST", chunked.stream, { "x-inngest-signature": freshButWrong() }));
    expect(stopped.status).toBe(503);
    expect(stopped.headers.get("retry-after")).toBe("5");
    expect(chunked.pulled.bytes).toBeLessThanOrEqual(0.5 * MiB + CHUNK);

    slow.release();
    expect((await pending).status).toBe(401);
    expect(unverifiedBytesInFlight()).toBe(0);
    const after = countedBody(MiB);
    expect((await webhookRoute.POST(streamed(url, "POST", after.stream, { ...webhookHeaders, "content-length": String(MiB) }), noParams)).status).toBe(401);
  });
});

describe("hardening #29.11: the sync guard of /api/inngest", () => {
  function syncCall(signature: string | null, { inBand = true, body = canonicalBody({ url: SERVE }) } = {}): Request {
    const headers: Record<string, string> = { "content-type": "application/json", "x-inngest-server-kind": "cloud" };
    if (inBand) headers["x-inngest-sync-kind"] = "in_band";
    if (signature) headers["x-inngest-signature"] = signature;
    return new Request(SERVE, { method: "PUT", body, headers });
  }

  it("hardening #29.11 a PUT with a signature header it cannot verify is refused (401 or 400), never a 500 and never an out-of-band sync", async () => {
    const fetchSpy = vi.spyOn(globalThis, "fetch");
    const body = canonicalBody({ url: SERVE });
    const cases: [Request, number][] = [
      [syncCall("garbage", { inBand: false }), 401],
      // Out of band is refused before the body is read; in band the signature is checked.
      [syncCall(freshButWrong(), { inBand: false }), 400],
      [syncCall(freshButWrong()), 401],
      [syncCall(signRequest({ body, signingKey: `signkey-prod-${"cd34".repeat(16)}` })), 401],
      // Rightly signed, but out of band: the executor never asks for that, and the SDK would try /fn/register.
      [syncCall(signRequest({ body, signingKey: ownSigningKey() }), { inBand: false }), 400],
    ];
    for (const [request, status] of cases) {
      const response = await PUT(request);
      expect(response.status).toBe(status);
      expect(response.headers.get("x-inngest-sync-kind")).toBeNull();
    }
    expect(fetchSpy.mock.calls.map(([input]) => String(input instanceof Request ? input.url : input))).not.toContainEqual(expect.stringContaining("/fn/register"));
    const signed = await PUT(syncCall(signRequest({ body, signingKey: ownSigningKey() })));
    expect(signed.status).toBe(200);
    expect(signed.headers.get("x-inngest-sync-kind")).toBe("in_band");
  });
});
