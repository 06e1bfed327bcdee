import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Inngest, InngestFunction } from "inngest";
import { serve } from "inngest/edge";
import { CHECKPOINT_PATH, Executor, handleCheckpointRequest, handleEventRequest, type ExecutorOptions, type FetchHandler } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { getEnv } from "@/lib/env";

/**
 * The executor suites run in two modes: `classic` (one call per step, no fn_id sent) and `checkpointed` (the app runs
 * steps back to back and reports them to /v1/checkpoint). Test files pick theirs with `setMode` before building.
 */
export type ExecutorMode = "classic" | "checkpointed";
/**
 * `strict`: the executors run in Inngest Cloud's strict mode (no wait look-back, Cloud's limits). On for a whole run
 * with GATEHOUSE_EXECUTOR_STRICT=cloud, or per file by a `*.strict.test.ts` variant that sets it before importing.
 */
export const harness = { mode: "classic" as ExecutorMode, strict: getEnv().GATEHOUSE_EXECUTOR_STRICT === "cloud" };

/** The Executor option for the harness's strict setting. */
export const strictOption = (): { strict: "cloud" | null } => ({ strict: harness.strict ? "cloud" : null });

/** The AppTarget flag for the current mode. */
export const checkpointing = () => harness.mode === "checkpointed";

/**
 * A real HTTP server with an Inngest serve endpoint at /api/inngest, the executor's event API at /e/:key and its
 * checkpoint API at /v1/checkpoint/:runId/async (the apps' Inngest base URL is this server's origin).
 */
export async function startServer(): Promise<{ origin: string; serveUrl: string; setHandler: (h: FetchHandler) => void; close: () => Promise<void> }> {
  let handler: FetchHandler = async () => new Response("no app yet", { status: 503 });
  const server = http.createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const url = `http://${req.headers.host}${req.url}`;
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
      const request = new Request(url, { method: req.method, headers, body: req.method === "GET" || req.method === "HEAD" ? undefined : body });
      const response = req.url?.startsWith("/e/")
        ? await handleEventRequest(request)
        : CHECKPOINT_PATH.test(new URL(url).pathname)
          ? await handleCheckpointRequest(request)
          : await handler(request);
      res.statusCode = response.status;
      response.headers.forEach((v, k) => res.setHeader(k, v));
      res.end(Buffer.from(await response.arrayBuffer()));
    } catch (err) {
      res.statusCode = 500;
      res.end(String(err));
    }
  });
  // Under load the client's keep-alive timer can fire late and reuse a socket the server just closed (ECONNRESET on a
  // loopback call, which a run with retries: 0 cannot survive). Keep idle sockets longer than any test.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    serveUrl: `${origin}/api/inngest`,
    setHandler: (h) => {
      handler = h;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Serve an app over HTTP and start an executor driving it through that URL. */
export async function startApp(
  build: (origin: string) => { inngest: Inngest.Any; functions: InngestFunction.Any[] },
  options: Partial<ExecutorOptions> = {},
) {
  const server = await startServer();
  const app = build(server.origin);
  server.setHandler(serve({ client: app.inngest, functions: app.functions }) as FetchHandler);
  const executor = new Executor({ apps: [{ url: server.serveUrl, checkpointing: checkpointing() }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {}, ...strictOption(), ...options });
  await executor.start();
  return {
    ...app,
    server,
    executor,
    send: (events: unknown) => app.inngest.send(events as never),
    close: async () => {
      await executor.stop();
      await server.close();
    },
  };
}

export type RunView = { id: string; fn_id: string; status: string; output: unknown; error: unknown; event: { data: Record<string, unknown> } };

export async function listRuns(fnSuffix: string): Promise<RunView[]> {
  const rows = await query<{ id: string; fn_id: string; status: string; output: string | null; error: string | null; event: string }>(
    "SELECT id, fn_id, status, output, error, event FROM executor_runs WHERE fn_id LIKE ? ORDER BY created_at, id",
    [`%-${fnSuffix}`],
  );
  return rows.map((r) => ({
    ...r,
    output: r.output === null ? null : JSON.parse(r.output),
    error: r.error === null ? null : JSON.parse(r.error),
    event: JSON.parse(r.event),
  }));
}

/** Wait (polling the database) until `fnSuffix` has `count` finished runs; returns them. */
export async function waitForRuns(fnSuffix: string, { count = 1, timeoutMs = 20_000, where }: { count?: number; timeoutMs?: number; where?: (r: RunView) => boolean } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [done] = await query<{ n: number }>(
      "SELECT count(*) AS n FROM executor_runs WHERE fn_id LIKE ? AND status IN ('completed','failed','cancelled')",
      [`%-${fnSuffix}`],
    );
    if (Number(done?.n) < count && Date.now() <= deadline) {
      await new Promise((r) => setTimeout(r, 25));
      continue;
    }
    const runs = (await listRuns(fnSuffix)).filter((r) => ["completed", "failed", "cancelled"].includes(r.status) && (!where || where(r)));
    if (runs.length >= count) return runs;
    if (Date.now() > deadline) {
      const all = await listRuns(fnSuffix);
      throw new Error(`Timed out waiting for ${count} finished runs of ${fnSuffix}; have ${JSON.stringify(all.map((r) => [r.status, r.error]))}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, { timeoutMs = 20_000, what = "condition" } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
