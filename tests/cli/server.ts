import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { getEnv } from "@/lib/env";
import { startWorkflowHarness } from "../workflow/harness";

type Handler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;
type RouteEntry = { pattern: RegExp; names: string[]; module: Record<string, unknown> };

const API_DIR = path.resolve(import.meta.dirname, "../../app/api");
/** Served by other means in tests: the executor calls the Inngest handler in-process; Auth.js is not used by a CLI. */
const SKIP = new Set(["auth", "inngest"]);

/** Every app/api/**\/route.ts with its path turned into a matcher ("[id]" → a named segment). */
async function loadRoutes(): Promise<RouteEntry[]> {
  const entries: RouteEntry[] = [];
  const walk = async (dir: string, segments: string[]) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (segments.length === 0 && SKIP.has(entry.name)) continue;
        await walk(path.join(dir, entry.name), [...segments, entry.name]);
      } else if (entry.name === "route.ts") {
        const names: string[] = [];
        const source = segments
          .map((s) => {
            const m = /^\[(\w+)\]$/.exec(s);
            if (!m) return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
            names.push(m[1]!);
            return "([^/]+)";
          })
          .join("/");
        entries.push({ pattern: new RegExp(`^/api/${source}$`), names, module: await import(path.join(dir, entry.name)) });
      }
    }
  };
  await walk(API_DIR, []);
  return entries;
}

/**
 * The real server, as far as an API client can tell: the app's own route handlers behind a node:http server, and the
 * real workflow on the embedded executor with the demo model. The CLI reaches it only over HTTP.
 */
export async function startApiServer() {
  const harness = await startWorkflowHarness();
  const routes = await loadRoutes();
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
    const match = routes.map((r) => ({ r, m: r.pattern.exec(url.pathname) })).find((x) => x.m);
    const handler = match?.r.module[req.method ?? "GET"] as Handler | undefined;
    if (!match || !handler) {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: "not_found:api", message: "No such route." } }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const request = new Request(url, {
      method: req.method,
      headers,
      body: body.length && req.method !== "GET" && req.method !== "HEAD" ? body : undefined,
      signal: abort.signal,
    });
    const params = Object.fromEntries(match.r.names.map((n, i) => [n, decodeURIComponent(match.m![i + 1]!)]));
    const response = await handler(request, { params: Promise.resolve(params) });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return void res.end();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
    } catch {
      // the client went away mid-stream
    }
    res.end();
  });
  let connections = 0;
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    user: harness.user,
    dataDir: getEnv().dataDir,
    /** TCP connections the server has accepted so far. */
    connections: () => connections,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await harness.close();
    },
  };
}
