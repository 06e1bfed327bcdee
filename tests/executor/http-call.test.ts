import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { callFunction, type CallBody } from "@/lib/executor/protocol";

/**
 * The executor's calls to an app over HTTP (lib/executor/http-call.ts): kept connections, and what happens when a kept
 * connection is gone by the time a call goes out on it.
 */

const sdk = { "content-type": "application/json", "x-inngest-sdk": "inngest-js:v4.24.0" };
const body = { event: { name: "e", data: {} }, events: [], steps: {}, ctx: { run_id: "r" }, version: 2 } as unknown as CallBody;

type App = { url: string; connections: Socket[]; requests: number; server: http.Server };
const apps: App[] = [];

async function app(handle: (app: App, req: http.IncomingMessage, res: http.ServerResponse) => void, keepAliveMs?: number): Promise<App> {
  const server = http.createServer((req, res) => {
    the.requests++;
    req.resume().once("end", () => handle(the, req, res));
  });
  if (keepAliveMs !== undefined) server.keepAliveTimeout = keepAliveMs;
  const the: App = { url: "", connections: [], requests: 0, server };
  server.on("connection", (socket) => the.connections.push(socket));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  the.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/inngest`;
  apps.push(the);
  return the;
}

const answer = (res: http.ServerResponse) => {
  res.writeHead(200, sdk);
  res.end(JSON.stringify({ ok: true }));
};

const call = (url: string) => callFunction({ target: { url }, fnId: "f", stepId: "step", body, timeoutMs: 10_000, runId: "r" });

afterEach(async () => {
  for (const a of apps.splice(0)) {
    a.server.closeAllConnections();
    await new Promise((r) => a.server.close(r));
  }
});

describe("executor → app over HTTP", () => {
  it("keeps one connection for calls one after another", async () => {
    const a = await app((_a, _req, res) => answer(res));
    for (let i = 0; i < 5; i++) expect(await call(a.url)).toEqual({ kind: "complete", data: { ok: true } });
    expect(a.requests).toBe(5);
    expect(a.connections).toHaveLength(1);
  });

  it("sends a call again on a new connection when its kept connection is closed before any answer", async () => {
    // The app closes an idle kept connection just as the next call goes out on it: that call never reached the function.
    const a = await app((the, req, res) => {
      if (the.requests === 2 && req.socket === the.connections[0]) return void req.socket.destroy();
      answer(res);
    });
    expect(await call(a.url)).toEqual({ kind: "complete", data: { ok: true } });
    expect(await call(a.url)).toEqual({ kind: "complete", data: { ok: true } });
    expect(a.requests).toBe(3);
    expect(a.connections).toHaveLength(2);
  });

  it("a connection that breaks after the app started answering is the app's failure, not sent again", async () => {
    const a = await app((the, _req, res) => {
      if (the.requests === 1) return answer(res);
      res.writeHead(200, { ...sdk, "content-length": "100" });
      res.write('{"ok":');
      setImmediate(() => res.socket?.destroy());
    });
    await call(a.url);
    const outcome = await call(a.url);
    expect(outcome).toMatchObject({ kind: "error", retriable: true });
    expect(a.requests).toBe(2);
  });

  it("closes an idle connection before the timeout the app announced (Keep-Alive: timeout=2), not on it", async () => {
    const a = await app((_a, _req, res) => answer(res), 2_000);
    await call(a.url);
    const closedByExecutor = new Promise<void>((r) => a.connections[0]!.once("end", r));
    await closedByExecutor;
    await call(a.url);
    expect(a.connections).toHaveLength(2);
    expect(a.requests).toBe(2);
  });
});
