import type { z } from "zod";
import { getEnv } from "@/lib/env";
import { AppError, describeIssues, isAppError } from "@/lib/errors";
import { requireUser, type SessionUser } from "@/lib/auth/guard";
import { log, withLogContext } from "@/lib/log";
import { requestHost } from "@/lib/auth/request-url";
import { withSecurityHeaders } from "@/lib/security/headers";
import { readCappedBody } from "@/lib/body";

type RouteContext<P> = { params: Promise<P> };

/**
 * Wrap a route handler: authenticate (unless `public`), check the origin of cookie-authenticated mutations, turn
 * AppErrors into typed JSON responses and anything else into a logged 500.
 */
export function route<P = Record<string, never>>(
  handler: (ctx: { request: Request; params: P; user: SessionUser }) => Promise<Response>,
): (request: Request, context: RouteContext<P>) => Promise<Response>;
export function route<P = Record<string, never>>(
  options: { public: true },
  handler: (ctx: { request: Request; params: P; user: null }) => Promise<Response>,
): (request: Request, context: RouteContext<P>) => Promise<Response>;
export function route<P>(
  a: unknown,
  b?: unknown,
): (request: Request, context: RouteContext<P>) => Promise<Response> {
  const isPublic = typeof a === "object" && a !== null && (a as { public?: boolean }).public === true;
  const handler = (b ?? a) as (ctx: { request: Request; params: P; user: SessionUser | null }) => Promise<Response>;
  const wrapped = async (request: Request, context: RouteContext<P>) => {
    // Every log line of this request carries its id; the caller gets it back to quote (a proxy's own id is kept).
    const requestId = requestIdOf(request);
    const response = await withLogContext({ requestId }, async () => {
      try {
        const params = (await context?.params) ?? ({} as P);
        const user = isPublic ? null : await requireUser(request);
        if (user?.via === "session") checkSameOrigin(request);
        return withSecurityHeaders(await handler({ request, params, user }));
      } catch (error) {
        return withSecurityHeaders(errorResponse(error));
      }
    });
    if (!response.headers.has("x-request-id")) {
      try {
        response.headers.set("x-request-id", requestId);
      } catch {
        // an immutable response (a redirect from a library): it goes without the header
      }
    }
    return response;
  };
  (wrapped as { guarded?: boolean }).guarded = !isPublic;
  return wrapped;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{8,80}$/;

/** The request's id: the one a proxy set (X-Request-Id, when it looks like an id), else a new one. */
export function requestIdOf(request: Request): string {
  const given = request.headers.get("x-request-id");
  return given && REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

export function errorResponse(error: unknown): Response {
  if (isAppError(error)) {
    if (!error.visible || error.status >= 500) log.error("request failed", { code: error.code, error: error.message });
    return error.toResponse();
  }
  log.error("unhandled error", { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
  return new AppError("internal:api").toResponse();
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Cookie-authenticated mutations must come from our own origin (cross-site request forgery). */
function checkSameOrigin(request: Request) {
  if (SAFE_METHODS.has(request.method)) return;
  const origin = request.headers.get("origin");
  const host = requestHost(request.headers);
  const allowed = new Set([new URL(request.url).origin, new URL(getEnv().publicUrl).origin]);
  // "null" (sandboxed frames, file: pages, some redirects) and anything else that is not a URL is simply not ours.
  const originUrl = origin ? parseUrl(origin) : null;
  if (originUrl && host) allowed.add(`${originUrl.protocol}//${host}`);
  if (!originUrl || !allowed.has(originUrl.origin) || originUrl.origin !== origin) {
    throw new AppError("forbidden:api", "Cross-site request refused: the Origin header does not match this site.");
  }
}

function parseUrl(value: string): URL | null {
  try {
    return new URL(value);
  } catch {
    return null;
  }
}

/** Read and validate a JSON body: 413 past the size limit, 400 for malformed JSON or a schema mismatch (naming fields). */
export async function readJson<S extends z.ZodType>(request: Request, schema: S): Promise<z.output<S>> {
  const limit = getEnv().GATEHOUSE_MAX_BODY_BYTES;
  const text = await readLimited(request, limit);
  let body: unknown;
  try {
    body = text.length === 0 ? undefined : JSON.parse(text);
  } catch {
    throw new AppError("bad_request:api", "The request body is not valid JSON.");
  }
  if (body === undefined) throw new AppError("bad_request:api", "The request body is empty; send a JSON object.");
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new AppError("bad_request:api", describeIssues(parsed.error.issues));
  return parsed.data;
}

/** Like readJson, but an empty body is an empty object (for actions whose fields are all optional). */
export async function readOptionalJson<S extends z.ZodType>(request: Request, schema: S): Promise<z.output<S>> {
  const hasBody = request.body !== null && request.headers.get("content-length") !== "0";
  if (!hasBody) return parseOrThrow(schema, {});
  const limit = getEnv().GATEHOUSE_MAX_BODY_BYTES;
  const text = await readLimited(request, limit);
  if (text.trim() === "") return parseOrThrow(schema, {});
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new AppError("bad_request:api", "The request body is not valid JSON.");
  }
  return parseOrThrow(schema, body);
}

function parseOrThrow<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new AppError("bad_request:api", describeIssues(parsed.error.issues));
  return parsed.data;
}

function tooLarge(limit: number) {
  return new AppError("payload_too_large:api", `The request body is larger than ${limit} bytes.`);
}

async function readLimited(request: Request, limit: number): Promise<string> {
  return (await readCappedBody({ request, limit, tooLarge: () => tooLarge(limit) })).toString("utf8");
}

export function json(data: unknown, init?: ResponseInit): Response {
  return Response.json(data, init);
}
