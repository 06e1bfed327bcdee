import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { and, eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { workflowEvents } from "@/lib/db/schema";
import { checkpointHooks } from "@/lib/executor/checkpoint";
import { query } from "@/lib/executor/store";
import { startEmbeddedExecutor } from "@/inngest/embedded";
import { findApiRoutes, serveApiRoutes } from "../../tests/cli/routes";

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

const routes = findApiRoutes();
await startEmbeddedExecutor();

const server = http.createServer(serveApiRoutes(routes));
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
console.log(`READY http://127.0.0.1:${(server.address() as AddressInfo).port}`);
