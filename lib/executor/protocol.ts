import { z } from "zod";
import { httpCall, type CallResponse } from "./http-call";
import { canonicalBody, SIGNATURE_HEADER, signRequest } from "./signing";

/**
 * The SDK side of Inngest's request/206 protocol (see /work/shared/INNGEST_PROTOCOL.md, checked against inngest-js
 * v4 InngestCommHandler): how to call a function or sync an app, and how to read what comes back. Nothing here
 * touches the database.
 */

/** A fetch-compatible handler: lets the executor call a serve endpoint in-process, without a socket. */
export type FetchHandler = (request: Request) => Promise<Response>;

/**
 * An app the executor drives: its serve URL, an in-process handler for it, and headers sent on every HTTP call.
 * `checkpointing`: the app's checkpoint calls (`POST {its Inngest base URL}/v1/checkpoint/...`) reach an endpoint on
 * this executor's database (its client's `fetch` routes them in-process, or its base URL points at a checkpoint
 * route). Only then does the executor send `ctx.fn_id`, which makes the SDK checkpoint; otherwise every step costs
 * one call (classic), which is also what an app with `checkpointing: false` gets.
 * `signingKey`: the app runs in signed (cloud) mode with this INNGEST_SIGNING_KEY; every call carries
 * X-Inngest-Signature as Inngest sends it, and `signingKeyFallback` is tried when the app refuses the first.
 */
export type AppTarget = {
  url: string;
  handler?: FetchHandler;
  headers?: Record<string, string>;
  checkpointing?: boolean;
  signingKey?: string;
  signingKeyFallback?: string;
};

export type StepResult = { data: unknown } | { error: unknown } | unknown;

export type CallBody = {
  event: unknown;
  events: unknown[];
  steps: Record<string, StepResult>;
  ctx: {
    run_id: string;
    attempt: number;
    max_attempts?: number;
    stack: { stack: string[]; current: number };
    disable_immediate_execution: boolean;
    use_api: false;
    /** Sent only to apps that checkpoint to this executor: the function, and the dispatch token echoed back. */
    fn_id?: string;
    qi_id?: string;
  };
  version: number;
};

const opSchema = z.looseObject({
  id: z.string().min(1),
  op: z.string().min(1),
  name: z.string().optional(),
  displayName: z.string().optional(),
  opts: z.record(z.string(), z.unknown()).nullish(),
  data: z.unknown().optional(),
  error: z.unknown().optional(),
});
export type OutgoingOp = z.infer<typeof opSchema>;

/** What one call to a serve endpoint came to. */
export type CallOutcome =
  | { kind: "complete"; data: unknown }
  | { kind: "ops"; ops: OutgoingOp[]; retryAfterMs?: number; requestVersion?: number }
  | { kind: "error"; retriable: boolean; error: SerializedError; retryAfterMs?: number };

export type SerializedError = { name: string; message: string; stack?: string; [k: string]: unknown };

export function protocolError(message: string): SerializedError {
  return { name: "ExecutorProtocolError", message };
}

const SDK_HEADER = "x-inngest-sdk";

export async function callFunction({
  target,
  fnId,
  stepId,
  body,
  timeoutMs,
  runId,
  dispatch,
  timeoutReason,
}: {
  target: AppTarget;
  fnId: string;
  stepId: string;
  body: CallBody;
  timeoutMs: number;
  runId: string;
  /** Echoed by the SDK in its checkpoint calls (Inngest sends these headers on every call). */
  dispatch?: { requestId: string; generation: number };
  /** Said of a call that ran out of time (strict mode: the host's step duration limit). */
  timeoutReason?: string;
}): Promise<CallOutcome> {
  const url = new URL(target.url);
  url.searchParams.set("fnId", fnId);
  url.searchParams.set("stepId", stepId);
  const init: CallInit = {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-inngest-server-kind": serverKind(target),
      "x-run-id": runId,
      "x-inngest-step-id": stepId,
      "x-inngest-req-version": String(body.version),
      ...(dispatch ? { "x-request-id": dispatch.requestId, "x-inngest-generation-id": String(dispatch.generation) } : {}),
    },
  };
  let response: CallResponse;
  try {
    response = await send(target, url, init, timeoutMs, body);
  } catch (err) {
    if (timeoutReason && isTimeout(err)) {
      return { kind: "error", retriable: true, error: protocolError(`Call to ${target.url} timed out after ${timeoutMs} ms: ${timeoutReason}`) };
    }
    return { kind: "error", retriable: true, error: protocolError(`Serve endpoint ${target.url} unreachable: ${describe(err)}`) };
  }
  return readCallResponse(response, target.url, target);
}

/** A signed-mode app expects Inngest's cloud; an unsigned one the dev server. */
function serverKind(target: AppTarget): "cloud" | "dev" {
  return target.signingKey ? "cloud" : "dev";
}

class CallTimeout extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = "CallTimeout";
  }
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && (err.name === "TimeoutError" || err.name === "CallTimeout");
}

/** A call's method and headers (names in lower case); the body is added by `send`. */
type CallInit = { method: string; headers: Record<string, string> };

/**
 * Send a request with `json` as its body. To a signed-mode app the body goes as canonical JSON with its signature;
 * when the app refuses it (401/403) and a fallback key is configured, it is signed again with that one, as the SDK's
 * own calls to Inngest fall back (helpers/net.ts fetchWithAuthFallback).
 */
async function send(target: AppTarget, url: URL, init: CallInit, timeoutMs: number, json: unknown): Promise<CallResponse> {
  if (!target.signingKey) return sendOnce(target, url, init, JSON.stringify(json), timeoutMs);
  const text = canonicalBody(json);
  const signed = (key: string): CallInit => ({ ...init, headers: { ...init.headers, [SIGNATURE_HEADER]: signRequest({ body: text, signingKey: key }) } });
  const response = await sendOnce(target, url, signed(target.signingKey), text, timeoutMs);
  if ((response.status === 401 || response.status === 403) && target.signingKeyFallback) {
    if (response instanceof Response) await response.body?.cancel().catch(() => undefined);
    return sendOnce(target, url, signed(target.signingKeyFallback), text, timeoutMs);
  }
  return response;
}

async function sendOnce(target: AppTarget, url: URL, init: CallInit, body: string, timeoutMs: number): Promise<CallResponse> {
  let headers = init.headers;
  if (target.headers) {
    headers = { ...headers };
    for (const [k, v] of Object.entries(target.headers)) headers[k.toLowerCase()] = v;
  }
  if (target.handler) {
    // Serve handlers build their own URL from the Host header, as they would behind a socket.
    const request = new BufferedRequest(url, { method: init.method, headers: { ...headers, host: url.host } }, body);
    // The in-process handler cannot be aborted; race it against a timer so a hung function still frees us, and clear
    // the timer when the call settles — a pending timer would keep the whole call (and its run) in memory until it fired.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new CallTimeout(timeoutMs)), timeoutMs);
    });
    try {
      return await Promise.race([target.handler(request), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
  return httpCall(url, { method: init.method, headers, body }, timeoutMs);
}

/** A buffered body's JSON, parsed on a later tick (a stream-read body's `json()` never settles synchronously either). */
const parsedLater = (text: string): Promise<unknown> => Promise.resolve().then(() => JSON.parse(text));

/** A buffered body's bytes, in an ArrayBuffer of their own. */
function bytesOf(text: string): ArrayBuffer {
  const bytes = Buffer.from(text);
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

/**
 * A request whose body is a string in memory, for an in-process serve handler: reading it (text, json, arrayBuffer)
 * hands the string over instead of streaming it through a ReadableStream built for it (about 150 µs a call on Node
 * 20, what the SDK's handler spends reading `req.text()`); `body` still gives a stream of the same bytes.
 */
export class BufferedRequest extends Request {
  readonly #text: string;

  constructor(url: URL | string, init: RequestInit, text: string) {
    super(url, { ...init, body: undefined });
    this.#text = text;
    // The stream is made only for a reader that asks for it.
    Object.defineProperty(this, "body", { get: () => new Response(text).body, configurable: true });
  }

  override text(): Promise<string> {
    return Promise.resolve(this.#text);
  }

  override json(): Promise<unknown> {
    return parsedLater(this.#text);
  }

  override arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(bytesOf(this.#text));
  }

  override clone(): Request {
    return new BufferedRequest(this.url, { method: this.method, headers: this.headers }, this.#text);
  }
}

/**
 * An answer whose body is a string in memory, for callers in this process (the SDK's `inngest.send()` reads the event
 * API's answer with `json()`): reading it hands the string over instead of streaming it through a ReadableStream built
 * for it (Response.json builds one, and `json()` drains it back); `body` still gives a stream of the same bytes, for a
 * caller that pipes it (a route, the worker's socket).
 */
export class BufferedResponse extends Response {
  readonly #text: string;

  constructor(text: string, init: ResponseInit) {
    super(null, init);
    this.#text = text;
    Object.defineProperty(this, "body", { get: () => new Response(text).body, configurable: true });
  }

  /** What Response.json(value, init) answers (its content type unless one is given), buffered. */
  static of(value: unknown, init: ResponseInit = {}): BufferedResponse {
    const headers = new Headers(init.headers);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
    return new BufferedResponse(JSON.stringify(value), { ...init, headers });
  }

  override text(): Promise<string> {
    return Promise.resolve(this.#text);
  }

  override json(): Promise<unknown> {
    return parsedLater(this.#text);
  }

  override arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(bytesOf(this.#text));
  }

  override bytes(): Promise<Uint8Array<ArrayBuffer>> {
    return this.arrayBuffer().then((buffer) => new Uint8Array(buffer));
  }

  override blob(): Promise<Blob> {
    return Promise.resolve(new Blob([this.#text], { type: this.headers.get("content-type") ?? "" }));
  }

  override clone(): Response {
    return new BufferedResponse(this.#text, { status: this.status, statusText: this.statusText, headers: this.headers });
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === "TimeoutError") return "request timed out";
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}

export async function readCallResponse(response: CallResponse, appUrl: string, target?: AppTarget): Promise<CallOutcome> {
  let text: string;
  try {
    text = await response.text();
  } catch (err) {
    return { kind: "error", retriable: true, error: protocolError(`Reading the response of ${appUrl} failed: ${describe(err)}`) };
  }
  if ((response.status === 401 || response.status === 403) && target?.signingKey && !response.headers.get(SDK_HEADER)) {
    // The SDK answers a signature it cannot verify with a bare 401 {"message":"Unauthorized"} (no SDK headers).
    return {
      kind: "error",
      retriable: false,
      error: protocolError(
        `${appUrl} rejected the call (${response.status}): it refused the executor's X-Inngest-Signature; the app's INNGEST_SIGNING_KEY (or its fallback) is not the key the executor signs with. Body: ${text.slice(0, 300)}`,
      ),
    };
  }
  if (!response.headers.get(SDK_HEADER)) {
    return {
      kind: "error",
      retriable: true,
      error: protocolError(
        `${appUrl} answered ${response.status} without an X-Inngest-Sdk header; is it an Inngest serve endpoint? Body: ${text.slice(0, 300)}`,
      ),
    };
  }
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
  const noRetry = response.headers.get("x-inngest-no-retry") === "true";
  let json: unknown;
  try {
    json = text === "" ? null : JSON.parse(text);
  } catch {
    return {
      kind: "error",
      retriable: !noRetry,
      error: protocolError(`${appUrl} answered ${response.status} with a body that is not JSON: ${text.slice(0, 300)}`),
    };
  }
  if (response.status === 200) return { kind: "complete", data: json };
  if (response.status === 206) {
    const list = Array.isArray(json) ? json : [json];
    const ops: OutgoingOp[] = [];
    for (const item of list) {
      const parsed = opSchema.safeParse(item);
      if (!parsed.success) {
        return {
          kind: "error",
          retriable: true,
          error: protocolError(`Malformed 206 from ${appUrl}: ${JSON.stringify(item)?.slice(0, 300)} (${parsed.error.issues[0]?.message})`),
        };
      }
      ops.push(parsed.data);
    }
    if (ops.length === 0) return { kind: "error", retriable: true, error: protocolError(`Empty 206 op list from ${appUrl}`) };
    // The execution version the SDK ran (x-inngest-req-version): 1 re-enters the run after each parallel step.
    const requestVersion = Number(response.headers.get("x-inngest-req-version") ?? NaN);
    return { kind: "ops", ops, retryAfterMs, ...(Number.isInteger(requestVersion) ? { requestVersion } : {}) };
  }
  const error = toSerializedError(json, response.status);
  if (response.status === 401) {
    error.message = target?.signingKey
      ? `${appUrl} rejected the call (401): it refused the executor's X-Inngest-Signature; the app's INNGEST_SIGNING_KEY (or its fallback) is not the key the executor signs with. ${error.message}`
      : `${appUrl} rejected the call (401): the app is in Inngest cloud mode and wants signed requests; give the executor its signing key (GATEHOUSE_EXECUTOR_SIGNING_KEY) or run it in dev mode (INNGEST_DEV=1 or isDev: true). ${error.message}`;
  }
  if (response.status >= 400 && response.status < 500 && !noRetry && response.headers.get("x-inngest-no-retry") === null) {
    return { kind: "error", retriable: false, error };
  }
  return { kind: "error", retriable: !noRetry, error, retryAfterMs };
}

export function toSerializedError(json: unknown, status?: number): SerializedError {
  if (json && typeof json === "object") {
    const o = json as Record<string, unknown>;
    const message = typeof o.message === "string" ? o.message : typeof o.error === "string" ? o.error : JSON.stringify(o);
    return { ...o, name: typeof o.name === "string" ? o.name : "Error", message };
  }
  return { name: "Error", message: status ? `HTTP ${status}: ${String(json)}` : String(json) };
}

function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** Function configuration as returned by an in-band sync (only the fields the executor uses are typed). */
export const functionConfigSchema = z.looseObject({
  id: z.string(),
  name: z.string().optional(),
  triggers: z.array(z.looseObject({ event: z.string().optional(), expression: z.string().optional(), cron: z.string().optional() })).default([]),
  steps: z.record(
    z.string(),
    z.looseObject({
      runtime: z.looseObject({ url: z.string() }),
      retries: z.looseObject({ attempts: z.number().optional() }).optional(),
    }),
  ),
  idempotency: z.string().nullish(),
  concurrency: z
    .union([
      z.number(),
      z.looseObject({ limit: z.number(), key: z.string().optional(), scope: z.string().optional() }),
      z.array(z.looseObject({ limit: z.number(), key: z.string().optional(), scope: z.string().optional() })),
    ])
    .nullish(),
  cancel: z.array(z.looseObject({ event: z.string(), if: z.string().optional(), timeout: z.string().optional() })).nullish(),
});
export type FunctionConfig = z.infer<typeof functionConfigSchema>;

const syncResponseSchema = z.looseObject({ app_id: z.string(), functions: z.array(z.unknown()) });

/** In-band sync: PUT the serve URL; the SDK answers with its app id and function configs. */
export async function syncApp({ target, timeoutMs }: { target: AppTarget; timeoutMs: number }): Promise<{ appId: string; functions: FunctionConfig[] }> {
  const response = await send(
    target,
    new URL(target.url),
    {
      method: "PUT",
      headers: { "content-type": "application/json", "x-inngest-sync-kind": "in_band", "x-inngest-server-kind": serverKind(target) },
    },
    timeoutMs,
    { url: target.url },
  );
  const text = await response.text();
  if ((response.status === 401 || response.status === 403) && target.signingKey) {
    throw new Error(
      `${target.url} refused the sync (${response.status}): it rejected the executor's request signature (X-Inngest-Signature). The app's ` +
        `INNGEST_SIGNING_KEY (or INNGEST_SIGNING_KEY_FALLBACK) must be the key the executor signs with (GATEHOUSE_EXECUTOR_SIGNING_KEY or its fallback).`,
    );
  }
  if (response.status === 401 || response.status === 403) {
    throw new Error(
      `${target.url} refused the sync (${response.status}): it wants a signed request or a key. For Gatehouse's own /api/inngest the executor sends ` +
        `its executor key (x-gatehouse-executor-key) only when the URL is GATEHOUSE_PUBLIC_URL/api/inngest; any other Inngest app in signed mode ` +
        `(isDev: false) needs its signing key given to the executor (GATEHOUSE_EXECUTOR_SIGNING_KEY), or must run in dev mode (INNGEST_DEV=1).`,
    );
  }
  if (!response.headers.get(SDK_HEADER)) throw new Error(`${target.url} is not an Inngest serve endpoint (status ${response.status}, no X-Inngest-Sdk header)`);
  if (response.status !== 200) throw new Error(`Sync of ${target.url} failed with ${response.status}: ${text.slice(0, 300)}`);
  if (response.headers.get("x-inngest-sync-kind") !== "in_band") {
    throw new Error(`${target.url} refused an in-band sync (INNGEST_ALLOW_IN_BAND_SYNC=0?)`);
  }
  const parsed = syncResponseSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`Sync of ${target.url} returned an unexpected body: ${parsed.error.message}`);
  const functions = parsed.data.functions.map((f) => {
    const r = functionConfigSchema.safeParse(f);
    if (!r.success) throw new Error(`Sync of ${target.url}: bad function config ${JSON.stringify(f).slice(0, 200)}: ${r.error.message}`);
    return r.data;
  });
  return { appId: parsed.data.app_id, functions };
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Inngest durations ("10s", "1h30m", "2d") or numbers of ms. Throws on anything else. */
export function parseDuration(value: unknown): number {
  if (typeof value === "number" && Number.isFinite(value)) return value;
  if (typeof value !== "string" || value.trim() === "") throw new Error(`Invalid duration ${JSON.stringify(value)}`);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g;
  let total = 0;
  let consumed = 0;
  for (const m of value.trim().matchAll(re)) {
    total += Number(m[1]) * (UNITS[m[2]!] ?? 0);
    consumed += m[0].length;
  }
  if (consumed !== value.trim().length) throw new Error(`Invalid duration ${JSON.stringify(value)}`);
  return total;
}

/** A Sleep op's `name`: a duration, or an ISO time (sleepUntil). Returns the wake time. */
export function sleepUntil(name: unknown, now: number): number {
  try {
    return deadline(name, now);
  } catch {
    throw new Error(`Sleep op with unreadable time ${JSON.stringify(name)}`);
  }
}

/** A timeout option: a duration from now, or an absolute ISO time. */
export function deadline(value: unknown, now: number): number {
  if (typeof value === "string") {
    try {
      return now + parseDuration(value);
    } catch {
      const at = Date.parse(value);
      if (!Number.isNaN(at)) return at;
    }
  }
  if (typeof value === "number" && Number.isFinite(value)) return now + value;
  throw new Error(`Unreadable timeout ${JSON.stringify(value)}`);
}
