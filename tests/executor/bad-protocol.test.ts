import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, sendEvents } from "@/lib/executor";
import { NO_PROGRESS_LIMIT } from "@/lib/executor/executor";
import { query } from "@/lib/executor/store";
import { waitForRuns } from "./harness";

/**
 * A fake serve endpoint that syncs like an Inngest SDK but answers calls with broken protocol, by function id. The
 * executor must retry, then fail the run with a readable stored error — and keep driving other runs.
 */
let mode: Record<string, (res: http.ServerResponse) => void> = {};
const sdk = { "x-inngest-sdk": "inngest-js:v4.24.0", "content-type": "application/json" };
const fnIds = ["reset", "malformed", "unknown-op", "timeout", "not-sdk", "ok", "bad-sleep", "repeats"];
let repeatsCalls = 0;

let server: http.Server;
let origin: string;
let executor: Executor;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url!, "http://x");
    if (req.method === "PUT") {
      res.writeHead(200, { ...sdk, "x-inngest-sync-kind": "in_band" });
      res.end(
        JSON.stringify({
          app_id: "bad",
          functions: fnIds.map((id) => ({
            id: `bad-${id}`,
            name: id,
            triggers: [{ event: `bad/${id}` }],
            steps: { step: { id: "step", name: "step", runtime: { type: "http", url: `${origin}/api/inngest?fnId=bad-${id}&stepId=step` }, retries: { attempts: 1 } } },
          })),
        }),
      );
      return;
    }
    const fnId = url.searchParams.get("fnId")!.replace(/^bad-/, "");
    mode[fnId]!(res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  mode = {
    reset: (res) => {
      res.socket?.destroy();
    },
    malformed: (res) => {
      res.writeHead(206, sdk);
      res.end(JSON.stringify([{ op: "StepRun" }]));
    },
    "unknown-op": (res) => {
      res.writeHead(206, sdk);
      res.end(JSON.stringify([{ id: "abc", op: "Teleport" }]));
    },
    timeout: () => {
      /* never answers */
    },
    "not-sdk": (res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html>proxy error</html>");
    },
    "bad-sleep": (res) => {
      res.writeHead(206, sdk);
      res.end(JSON.stringify([{ id: "s", op: "Sleep", name: "next tuesday-ish" }]));
    },
    // Reports a step's result and plans the same step again, on every call: after the first call everything it reports
    // already has a result. It once made the executor call it again at once, forever (the planned step's pending row
    // was never cleared).
    repeats: (res) => {
      repeatsCalls++;
      res.writeHead(206, sdk);
      res.end(JSON.stringify([{ id: "x", op: "StepRun", data: 1 }, { id: "x", op: "StepPlanned" }]));
    },
    ok: (res) => {
      res.writeHead(200, sdk);
      res.end(JSON.stringify({ fine: true }));
    },
  };
  executor = new Executor({ apps: [{ url: `${origin}/api/inngest` }], pollMs: 50, requestTimeoutMs: 300, backoff: () => 20, log: () => {} });
  await executor.start();
});

afterAll(async () => {
  await executor?.stop();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe("bad protocol input", () => {
  it.each([
    ["reset", /unreachable/],
    ["malformed", /Malformed 206/],
    ["unknown-op", /Unsupported op "Teleport"/],
    ["timeout", /unreachable: request timed out|timed out/],
    ["not-sdk", /without an X-Inngest-Sdk header/],
    ["bad-sleep", /Malformed Sleep op/],
  ])("%s → retried, then failed with a readable error", async (id, message) => {
    await sendEvents({ name: `bad/${id}`, data: {} });
    const [run] = await waitForRuns(id);
    expect(run?.status).toBe("failed");
    expect((run?.error as { message: string }).message).toMatch(message);
  });

  it("a run whose app reports only what is already recorded backs off and fails after a bound, with a clear error", async () => {
    await sendEvents({ name: "bad/repeats", data: {} });
    const [run] = await waitForRuns("repeats");
    expect(run?.status).toBe("failed");
    expect((run?.error as { message: string }).message).toMatch(/made no progress.*reported only ops that already have results/);
    const [pending] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_pending WHERE run_id = ?", [run!.id]);
    expect(Number(pending?.n)).toBe(0);
    // One call that records x, then (with the obsolete pending row cleared) NO_PROGRESS_LIMIT + 1 calls that change nothing.
    expect(repeatsCalls).toBeLessThanOrEqual(NO_PROGRESS_LIMIT + 3);
  });

  it("an app that answers a sync with 401 gets a signing hint, is retried with backoff, and is logged once", async () => {
    let syncs = 0;
    const guarded = http.createServer((req, res) => {
      syncs++;
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "unauthorized" }));
    });
    await new Promise<void>((r) => guarded.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(guarded.address() as AddressInfo).port}/api/inngest`;
    const logs: string[] = [];
    const refused = new Executor({ apps: [{ url }], pollMs: 20, backoff: () => 20, log: (_level, message) => logs.push(message) });
    await refused.start();
    try {
      const status = await refused.status();
      const error = status.apps.find((a) => a.url === url)?.error ?? "";
      expect(error).toMatch(/refused the sync \(401\)/);
      expect(error).toMatch(/executor key|dev mode/);
      expect(error).not.toMatch(/is not an Inngest serve endpoint/);
      // 50 polls in 1 s: with backoff (1 s, then 2 s) the app is tried at most twice more in that time.
      await new Promise((r) => setTimeout(r, 1000));
      expect(syncs).toBeGreaterThanOrEqual(1);
      expect(syncs).toBeLessThanOrEqual(3);
      expect(logs.filter((m) => m.includes(url))).toHaveLength(1);
    } finally {
      await refused.stop();
      guarded.closeAllConnections();
      await new Promise((r) => guarded.close(r));
    }
  });

  it("an app that is down at start is recorded with a readable sync error", async () => {
    const down = new Executor({ apps: [{ url: "http://127.0.0.1:9/api/inngest" }], pollMs: 50, backoff: () => 20, log: () => {} });
    await down.start();
    const status = await down.status();
    expect(status.apps.find((a) => a.url.includes(":9/"))?.error).toMatch(/fetch failed|ECONNREFUSED|unreachable/i);
    await down.stop();
  });

  it("the executor keeps driving other runs", async () => {
    await sendEvents({ name: "bad/ok", data: {} });
    const [run] = await waitForRuns("ok");
    expect(run?.output).toEqual({ fine: true });
    expect((await executor.status()).running).toBe(true);
  });
});

describe("event API input", () => {
  it("rejects bodies that are not events with a clear 400", async () => {
    const { handleEventRequest } = await import("@/lib/executor");
    const post = (body: string) => handleEventRequest(new Request("http://x/e/key", { method: "POST", body }));
    const notJson = await post("{nope");
    expect(notJson.status).toBe(400);
    expect((await notJson.json()).error).toMatch(/JSON/);
    const noName = await post(JSON.stringify([{ data: {} }]));
    expect(noName.status).toBe(400);
    expect((await noName.json()).error).toMatch(/event 0: name/);
    const ok = await post(JSON.stringify({ name: "bad/none", data: {} }));
    expect(await ok.json()).toEqual({ ids: [expect.any(String)], status: 200 });
  });
});
