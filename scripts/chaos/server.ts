import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { and, eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { workflowEvents } from "@/lib/db/schema";
import { checkpointHooks } from "@/lib/executor/checkpoint";
import { query } from "@/lib/executor/store";
import { startEmbeddedExecutor } from "@/inngest/embedded";

/**
 * The server `npm run chaos` kills: Gatehouse's own route handlers (app/api/**) behind node:http, and the embedded
 * executor started exactly as the Next server's instrumentation starts it (startEmbeddedExecutor: Gatehouse's app,
 * signed, in-process transport), on the DATABASE_URL / GATEHOUSE_DATA_DIR of the environment. What `next start`
 * adds on top (Next's router, pages, Auth.js) is not here: a `next build` takes minutes on this machine, and an API
 * client cannot tell the difference for these routes.
 *
 *   node --import tsx scripts/chaos/server.ts --arm <file>
 *
 * Prints `READY <url>` once it serves. With --arm, it kills itself (SIGKILL) once <file> holds
 * {"targets": [{"runId", "type", "count"}, …]} and every one of those runs has reached `count` events of `type`, each
 * held at its first checkpoint after (the step that wrote the event has done all its side effects — a git commit, say
 * — and its result is not stored yet) until the last one gets there.
 */
type Handler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;
type RouteEntry = { pattern: RegExp; names: string[]; file: string; module?: Promise<Record<string, unknown>> };

const API_DIR = path.resolve(import.meta.dirname, "../../app/api");
/** Not served here: the executor calls the Inngest handler in-process, and API clients use tokens, not Auth.js. */
const SKIP = new Set(["auth", "inngest"]);

/** Every app/api/**\/route.ts with its path as a matcher ("[id]" → a named segment); a module is imported on its first request. */
function findRoutes(): RouteEntry[] {
  const entries: RouteEntry[] = [];
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

const armIndex = process.argv.indexOf("--arm");
const armFile = armIndex > 0 ? process.argv[armIndex + 1] : undefined;
/** Armed runs held at their checkpoint, waiting for the others. */
const arrived = new Set<string>();

async function crashIfArmed(executorRunId: string): Promise<void> {
  if (!armFile || !fs.existsSync(armFile)) return;
  const { targets } = JSON.parse(fs.readFileSync(armFile, "utf8")) as { targets: Array<{ runId: string; type: string; count: number }> };
  const [owner] = await query<{ runId: string | null }>("SELECT json_extract(event, '$.data.runId') AS runId FROM executor_runs WHERE id = ? AND fn_id LIKE '%-run-workflow'", [executorRunId]);
  const target = targets.find((t) => t.runId === owner?.runId);
  if (!target) return;
  const db = await getDb();
  const [row] = await db
    .select({ n: sql<number>`count(*)` })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, target.runId), eq(workflowEvents.type, target.type)));
  if ((row?.n ?? 0) < target.count) return;
  arrived.add(target.runId);
  // Held here (its result never stored) until the last armed run gets to its own checkpoint, which kills us all.
  if (targets.some((t) => !arrived.has(t.runId))) await new Promise(() => {});
  fs.rmSync(armFile, { force: true });
  process.kill(process.pid, "SIGKILL");
  await new Promise(() => {});
}
checkpointHooks.beforeStore = crashIfArmed;

const routes = findRoutes();
await startEmbeddedExecutor();

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
  const match = routes.map((r) => ({ r, m: r.pattern.exec(url.pathname) })).find((x) => x.m);
  const module = match ? await (match.r.module ??= import(match.r.file) as Promise<Record<string, unknown>>) : undefined;
  const handler = module?.[req.method ?? "GET"] as Handler | undefined;
  if (!match || !handler) {
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: "not_found:api", message: "No such route." } }));
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const request = new Request(url, { method: req.method, headers, body: body.length && req.method !== "GET" && req.method !== "HEAD" ? body : undefined });
  const params = Object.fromEntries(match.r.names.map((n, i) => [n, decodeURIComponent(match.m![i + 1]!)]));
  const response = await handler(request, { params: Promise.resolve(params) });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
console.log(`READY http://127.0.0.1:${(server.address() as AddressInfo).port}`);
