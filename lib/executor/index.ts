import { getEnv } from "@/lib/env";
import { readCappedText } from "@/lib/body";
import { EventValidationError, ingestEvents } from "./events";
import { Executor, localHandoff, strictEventLimit, wakeLocal, type ExecutorOptions, type ExecutorStatus } from "./executor";
import { BufferedResponse, type AppTarget } from "./protocol";

export { Executor, defaultBackoff, cloudLimits, type CloudLimits, type ExecutorOptions, type ExecutorStatus } from "./executor";
export { signRequest, hashSigningKey, bearerMatchesSigningKey, SIGNATURE_HEADER } from "./signing";
export { ingestEvents, EventValidationError } from "./events";
export { checkpointingFetch, handleCheckpointRequest, handleCheckpointBody, bearerCarriesKey, CHECKPOINT_PATH } from "./checkpoint";
export type { AppTarget, FetchHandler } from "./protocol";

/*
 * The embedded executor — a generic driver for Inngest apps (it knows nothing of Gatehouse's workflow).
 *
 * - Functions: whatever a serve endpoint registers. Gatehouse's own are listed in inngest/index.ts (`functions`).
 * - Start: instrumentation.ts → inngest/embedded.ts → startExecutor() in the web server (embedded mode, unless
 *   GATEHOUSE_EMBEDDED_WORKER=false), or `npm run worker [-- --app <serve url>]` on its own.
 * - Events: `inngest.send()` from the app (POST /e/:key), or sendEvents() here; both store the event, start
 *   triggered runs, resolve waits and apply cancelOn in one transaction.
 * - Health: getExecutorStatus().
 */

/**
 * Process-wide executor (embedded mode). Cached on globalThis so Next's hot reload does not start a second one.
 */
const globalForExecutor = globalThis as unknown as { __gatehouseExecutor?: Executor };

/** The keys the executor signs its calls to other apps with (GATEHOUSE_EXECUTOR_SIGNING_KEY and its fallback). */
export function configuredSigning(): Pick<AppTarget, "signingKey" | "signingKeyFallback"> {
  const env = getEnv();
  if (!env.GATEHOUSE_EXECUTOR_SIGNING_KEY) return {};
  return { signingKey: env.GATEHOUSE_EXECUTOR_SIGNING_KEY, signingKeyFallback: env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK };
}

/** Serve URLs from GATEHOUSE_EXECUTOR_APPS (comma separated). */
export function configuredAppUrls(): string[] {
  return (getEnv().GATEHOUSE_EXECUTOR_APPS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Start (once) the process's executor for `apps` plus GATEHOUSE_EXECUTOR_APPS. */
export async function startExecutor(options: Partial<ExecutorOptions> & { apps: AppTarget[] }): Promise<Executor> {
  const existing = globalForExecutor.__gatehouseExecutor;
  if (existing) {
    for (const app of options.apps) existing.addApp(app);
    await existing.syncAll();
    return existing;
  }
  const apps = new Map<string, AppTarget>();
  for (const url of configuredAppUrls()) apps.set(url, { url, ...configuredSigning() });
  for (const app of options.apps) apps.set(app.url, app);

  const executor = new Executor({ ...options, apps: [...apps.values()] });
  globalForExecutor.__gatehouseExecutor = executor;
  await executor.start();
  return executor;
}

export function getExecutor(): Executor | undefined {
  return globalForExecutor.__gatehouseExecutor;
}

export async function stopExecutor(): Promise<void> {
  const executor = globalForExecutor.__gatehouseExecutor;
  globalForExecutor.__gatehouseExecutor = undefined;
  await executor?.stop();
}

export type ExecutorHealth = {
  mode: "embedded" | "inngest";
  /** True when this process drives runs (embedded worker in the web server, or `npm run worker`). */
  running: boolean;
} & Partial<Omit<ExecutorStatus, "running">>;

/** For /api/health: which execution mode is active and, in embedded mode, what the in-process executor is doing. */
export async function getExecutorStatus(): Promise<ExecutorHealth> {
  const mode = getEnv().executionMode;
  const executor = getExecutor();
  if (!executor) return { mode, running: false };
  const status = await executor.status();
  return { mode, ...status };
}

/** Ingest events and let this process's executor act on them at once (other processes see them on their next poll). */
export async function sendEvents(events: unknown): Promise<{ ids: string[] }> {
  // Strict mode refuses events over Cloud's size limit, as Inngest's event API does.
  // The runs it makes runnable are leased in its own transaction by this process's executor, if one runs here.
  const { ids, woken } = await ingestEvents(events, { maxEventBytes: strictEventLimit(), handoff: localHandoff });
  wakeLocal(woken);
  return { ids };
}

/**
 * The event API the SDK's `inngest.send()` talks to in embedded mode: POST /e/:key with a JSON event or array of
 * events, answered with `{ids, status: 200}`. The key is not checked: this endpoint exists only in embedded mode,
 * where no event key is configured.
 */
export async function handleEventRequest(request: Request): Promise<Response> {
  if (request.method !== "POST") return Response.json({ error: "Use POST to send events", status: 405 }, { status: 405 });
  const max = getEnv().GATEHOUSE_MAX_BODY_BYTES;
  return handleEventBody(await readCappedText(request, max), max);
}

/**
 * The event API for a body already read (null: it was over `max` bytes), as the in-process transports and the worker
 * call it: the SDK sends its events as a string, so no `Request` is built to carry it and no stream is read back.
 */
export async function handleEventBody(text: string | null, max = getEnv().GATEHOUSE_MAX_BODY_BYTES): Promise<Response> {
  if (text === null || (text.length > max / 3 && Buffer.byteLength(text) > max)) {
    return Response.json({ error: `Events body over ${max} bytes (GATEHOUSE_MAX_BODY_BYTES)`, status: 413 }, { status: 413 });
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return Response.json({ error: "Body must be JSON: an event or an array of events", status: 400 }, { status: 400 });
  }
  try {
    const { ids } = await sendEvents(body);
    // Buffered: the SDK reads this answer with json(), which then takes the string as is (no stream built and drained).
    return BufferedResponse.of({ ids, status: 200 });
  } catch (err) {
    if (err instanceof EventValidationError) return Response.json({ error: err.message, status: err.status }, { status: err.status });
    throw err;
  }
}
