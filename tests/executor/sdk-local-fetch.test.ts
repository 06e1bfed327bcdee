import http from "node:http";
import type { AddressInfo } from "node:net";
import { Inngest } from "inngest";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

/*
 * patches/inngest+4.24.0.patch, change 10 (README, "Patched dependencies"): a client given no `fetch` of its own sends
 * its calls to an `http:` origin (a dev server, the executor's event and checkpoint API) over node:http with a
 * keep-alive agent, not through the global undici `fetch`, which costs about 0.5 ms of CPU more per call. These tests
 * fail without the patch (the calls never reach node:http) and hold that what the SDK sees is what `fetch` gives it:
 * status, status text, headers, body, errors, aborts, redirects; https and a client's own `fetch` stay on `fetch`.
 */

type Seen = { method: string; url: string; headers: http.IncomingHttpHeaders; body: string };
const seen: Seen[] = [];
let connections = 0;
let origin = "";
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
    const path = (req.url ?? "").split("?")[0] ?? "";
    if (path.startsWith("/e/")) {
      res.setHeader("content-type", "application/json");
      res.setHeader("set-cookie", ["a=1", "b=2"]);
      res.end(JSON.stringify({ ids: ["evt-1"], status: 200 }));
    } else if (path === "/json") {
      res.writeHead(201, "Made It", { "content-type": "application/json", "x-probe": ["one", "two"] });
      res.end(JSON.stringify({ echo: body, method: req.method }));
    } else if (path === "/empty") {
      res.writeHead(204).end();
    } else if (path === "/stored") {
      // what the executor answers a checkpoint: 200 with no body
      res.writeHead(200, { "x-probe": "stored" }).end();
    } else if (path === "/moved") {
      res.writeHead(307, { location: "/json" }).end();
    } else if (path === "/see-other") {
      res.writeHead(303, { location: "/json" }).end();
    } else if (path === "/slow") {
      setTimeout(() => res.end("late"), 2_000).unref();
    } else {
      res.writeHead(404, { "content-type": "text/plain" }).end("no such thing");
    }
  });
});
server.on("connection", () => connections++);

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  vi.restoreAllMocks();
  seen.length = 0;
});

/** The client's own fetch (what its send, checkpoint and API calls use), for a client given no `fetch`. */
const clientFetch = () => new Inngest({ id: "local-fetch-probe", isDev: true, baseUrl: origin }).fetch;

/** What a caller reads of a response, the same whichever fetch made it. */
async function read(res: Response) {
  return {
    status: res.status,
    statusText: res.statusText,
    ok: res.ok,
    contentType: res.headers.get("content-type"),
    probe: res.headers.get("x-probe"),
    body: await res.text(),
  };
}

describe("an Inngest client without its own fetch calls an http: origin over node:http (patched)", () => {
  it("sends events over node:http, one kept connection for several sends, without fetch's headers", async () => {
    const requests = vi.spyOn(http, "request");
    const inngest = new Inngest({ id: "local-fetch-probe", isDev: true, baseUrl: origin });
    const before = connections;
    for (let i = 0; i < 3; i++) {
      await expect(inngest.send({ name: "probe/sent", data: { i } })).resolves.toEqual({ ids: ["evt-1"] });
    }
    expect(requests).toHaveBeenCalledTimes(3);
    expect(connections - before).toBe(1);
    expect(seen).toHaveLength(3);
    const first = seen[0]!;
    expect(first.method).toBe("POST");
    expect(first.url).toMatch(/^\/e\//);
    expect(JSON.parse(first.body)).toMatchObject([{ name: "probe/sent", data: { i: 0 } }]);
    expect(first.headers["content-type"]).toBe("application/json");
    expect(first.headers["content-length"]).toBe(String(Buffer.byteLength(first.body)));
    expect(first.headers["x-inngest-sdk"]).toMatch(/^inngest-js:/);
    // undici's fetch adds these to every request; node:http does not
    expect(first.headers["sec-fetch-mode"]).toBeUndefined();
  });

  it("answers like fetch: status, status text, headers, body; 204 has no body; a string body defaults to text/plain", async () => {
    const requests = vi.spyOn(http, "request");
    const local = clientFetch();
    for (const [path, init] of [
      ["/json", { method: "POST", body: "hello", headers: { "x-mine": "1" } }],
      ["/json", { method: "PUT", body: "{\"a\":1}", headers: { "Content-Type": "application/json" } }],
      ["/empty", { method: "POST", body: "x" }],
      ["/stored", { method: "POST", body: "{}" }],
      ["/missing", undefined],
    ] as const) {
      const viaFetch = await read(await fetch(origin + path, init));
      const n = seen.length;
      const viaLocal = await read(await local(new URL(origin + path), init));
      expect(viaLocal).toEqual(viaFetch);
      expect(seen[n]!.headers["content-type"]).toBe(seen[n - 1]!.headers["content-type"]);
      expect(seen[n]!.body).toBe(seen[n - 1]!.body);
    }
    expect(requests).toHaveBeenCalledTimes(5);
  });

  it("answers a body-less 200 (a stored checkpoint) without building a body stream, read the same as fetch's", async () => {
    const local = clientFetch();
    const viaFetch = await fetch(`${origin}/stored`, { method: "POST", body: "{}" });
    const viaLocal = await local(`${origin}/stored`, { method: "POST", body: "{}" });
    // the one difference, and the point: fetch builds an empty body stream nobody reads
    expect(viaFetch.body).not.toBeNull();
    expect(viaLocal.body).toBeNull();
    expect([viaLocal.status, viaLocal.ok, viaLocal.statusText, viaLocal.headers.get("x-probe")]).toEqual([viaFetch.status, viaFetch.ok, viaFetch.statusText, viaFetch.headers.get("x-probe")]);
    expect(new Uint8Array(await viaLocal.clone().arrayBuffer())).toEqual(new Uint8Array(await viaFetch.clone().arrayBuffer()));
    const fetchJson = await viaFetch.json().catch((e: unknown) => e);
    const localJson = await viaLocal.json().catch((e: unknown) => e);
    expect(localJson).toBeInstanceOf(SyntaxError);
    expect((localJson as Error).message).toBe((fetchJson as Error).message);
  });

  it("follows redirects as fetch does (307 keeps the POST and its body, 303 turns it into a GET)", async () => {
    const local = clientFetch();
    const kept = await (await local(`${origin}/moved`, { method: "POST", body: "again" })).json();
    expect(kept).toEqual({ echo: "again", method: "POST" });
    const seeOther = await (await local(`${origin}/see-other`, { method: "POST", body: "dropped" })).json();
    expect(seeOther).toEqual({ echo: "", method: "GET" });
  });

  it("fails like fetch: a refused connection is a TypeError 'fetch failed' with its cause; an abort rejects with the reason", async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const dead = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/e/key`;
    await new Promise((resolve) => closed.close(resolve));
    const requests = vi.spyOn(http, "request");
    const local = clientFetch();
    const viaFetch = await fetch(dead, { method: "POST", body: "{}" }).catch((e: unknown) => e);
    const viaLocal = await local(dead, { method: "POST", body: "{}" }).catch((e: unknown) => e);
    expect(requests).toHaveBeenCalledTimes(1);
    expect(viaLocal).toBeInstanceOf(TypeError);
    expect((viaLocal as Error).message).toBe((viaFetch as Error).message);
    expect(((viaLocal as Error).cause as NodeJS.ErrnoException).code).toBe("ECONNREFUSED");

    const controller = new AbortController();
    const pending = local(`${origin}/slow`, { signal: controller.signal }).catch((e: unknown) => e);
    setTimeout(() => controller.abort(), 20);
    const aborted = await pending;
    expect(aborted).toBe(controller.signal.reason);
    expect((aborted as Error).name).toBe("AbortError");
    await expect(local(`${origin}/json`, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: "AbortError" });
  });

  it("leaves https, Request objects and a client's own fetch on fetch", async () => {
    const requests = vi.spyOn(http, "request");
    const local = clientFetch();
    await expect(local("https://127.0.0.1:1/e/key", { method: "POST", body: "{}" })).rejects.toThrow("fetch failed");
    expect(await (await local(new Request(`${origin}/json`, { method: "POST", body: "r" }))).json()).toEqual({ echo: "r", method: "POST" });
    const own = vi.fn((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
    const inngest = new Inngest({ id: "local-fetch-probe", isDev: true, baseUrl: origin, fetch: own });
    await expect(inngest.send({ name: "probe/sent", data: {} })).resolves.toEqual({ ids: ["evt-1"] });
    expect(own).toHaveBeenCalledTimes(1);
    expect(requests).not.toHaveBeenCalled();
  });
});
