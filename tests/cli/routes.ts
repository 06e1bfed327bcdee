import fs from "node:fs";
import type http from "node:http";
import path from "node:path";

/*
 * The app's API route handlers (app/api/**\/route.ts) behind a node:http server, as the test server
 * (tests/cli/server.ts) and the server `npm run chaos` kills (scripts/chaos/server.ts) both serve them: one loader, one
 * request handler.
 */

type Handler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;
export type ApiRoute = { pattern: RegExp; names: string[]; file: string; module?: Promise<Record<string, unknown>> };

const API_DIR = path.resolve(import.meta.dirname, "../../app/api");
/** Served by other means here: the executor calls the Inngest handler in-process; API clients use tokens, not Auth.js. */
const SKIP = new Set(["auth", "inngest"]);

/** Every app/api/**\/route.ts with its path as a matcher ("[id]" → a named segment); its module is imported on first use. */
export function findApiRoutes(): ApiRoute[] {
  const entries: ApiRoute[] = [];
  const walk = (dir: string, segments: string[]) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (segments.length === 0 && SKIP.has(entry.name)) continue;
        walk(path.join(dir, entry.name), [...segments, entry.name]);
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
        entries.push({ pattern: new RegExp(`^/api/${source}$`), names, file: path.join(dir, entry.name) });
      }
    }
  };
  walk(API_DIR, []);
  return entries;
}

const load = (route: ApiRoute) => (route.module ??= import(route.file) as Promise<Record<string, unknown>>);

/** Import every route's module now (so that no request pays for it). */
export async function importApiRoutes(routes: ApiRoute[]): Promise<void> {
  await Promise.all(routes.map(load));
}

/**
 * A node:http request listener that hands each request to its route's handler (a 404 in the API's error shape when
 * none), streams the response back, and aborts the request's signal when the client goes away.
 */
export function serveApiRoutes(routes: ApiRoute[]): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> {
  return async (req, res) => {
    const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
    const match = routes.map((r) => ({ r, m: r.pattern.exec(url.pathname) })).find((x) => x.m);
    const handler = match ? ((await load(match.r))[req.method ?? "GET"] as Handler | undefined) : undefined;
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
  };
}
