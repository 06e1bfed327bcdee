import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, sendEvents } from "@/lib/executor";
import { waitForRuns } from "./harness";

/**
 * A fake serve endpoint that syncs like an Inngest SDK but answers calls with broken protocol, by function id. The
 * executor must retry, then fail the run with a readable stored error — and keep driving other runs.
 */
let mode: Record<string, (res: http.ServerResponse) => void> = {};
const sdk = { "x-inngest-sdk": "inngest-js:v4.24.0", "content-type": "application/json" };
const fnIds = ["reset", "malformed", "unknown-op", "timeout", "not-sdk", "ok", "bad-sleep"];

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
