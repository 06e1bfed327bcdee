import { Auth } from "@auth/core";
import { getAuthConfig } from "@/lib/auth/config";
import { deviceFrom, newDeviceCookie } from "@/lib/auth/device-cookie";
import { clientAddress, loginThrottle, recordLoginAttempt } from "@/lib/auth/login-throttle";
import { requestWithHostUrl } from "@/lib/auth/request-url";
import { AppError } from "@/lib/errors";
import { bufferedBody, readUnverifiedBody } from "@/lib/body";
import { errorResponse } from "@/lib/http";
import { log } from "@/lib/log";
import { withSecurityHeaders } from "@/lib/security/headers";

export const dynamic = "force-dynamic";

const LOCAL_CALLBACK = /\/api\/auth\/callback\/local\/?$/;
const LOCAL_ACCOUNT = "local-owner";

// Auth.js's own endpoints (sign-in, callback, session, csrf, sign-out); they do their own CSRF checks.
async function handler(request: Request): Promise<Response> {
  return withSecurityHeaders(await authHandler(request));
}

/** Auth.js's forms (sign-in, sign-out, the CSRF token, a session update) are a few hundred bytes. */
const MAX_AUTH_BODY_BYTES = 64 * 1024;

async function authHandler(request: Request): Promise<Response> {
  try {
    const local = request.method === "POST" && LOCAL_CALLBACK.test(new URL(request.url).pathname);
    if (!local) return await Auth(await requestWithHostUrl(await bufferedAuthRequest(request)), getAuthConfig());

    // The owner's password and one-time links: throttled per client address (or known device) and per account.
    const keys = { account: LOCAL_ACCOUNT, client: clientAddress(request.headers), device: deviceFrom(request.headers, LOCAL_ACCOUNT) };
    const wait = loginThrottle().retryAfter(keys);
    if (wait > 0) {
      log.warn("local sign-in refused: too many failed attempts", { client: keys.client, retryAfterSeconds: wait });
      if (request.headers.get("accept")?.includes("text/html")) return tooManyPage(wait);
      return new AppError("rate_limited:auth", `Too many failed sign-in attempts; try again in ${wait} s.`, {
        headers: { "retry-after": String(wait) },
        details: { retryAfterSeconds: wait },
      }).toResponse();
    }
    const forAuth = await requestWithHostUrl(await bufferedAuthRequest(request));
    const response = await Auth(forAuth, getAuthConfig());
    const ok = setsSession(response);
    recordLoginAttempt({ keys, ok });
    if (ok && !keys.device) {
      response.headers.append("set-cookie", newDeviceCookie({ account: LOCAL_ACCOUNT, secure: new URL(forAuth.url).protocol === "https:" }));
    }
    return response;
  } catch (error) {
    return errorResponse(error);
  }
}

/**
 * A POST's body is read before anyone is known (it carries the password): within MAX_AUTH_BODY_BYTES and counted with
 * the other unverified bodies (lib/body.ts).
 */
async function bufferedAuthRequest(request: Request): Promise<Request> {
  if (request.method !== "POST") return request;
  const body = await readUnverifiedBody({ request, limit: MAX_AUTH_BODY_BYTES, surface: "auth", what: "The sign-in request's body" });
  return new Request(request.url, { method: request.method, headers: request.headers, body: bufferedBody(body), redirect: "manual" });
}

/** The sign-in form is a plain form POST: a browser gets a readable page (still a 429 with Retry-After). */
function tooManyPage(wait: number): Response {
  const html = `<!doctype html><meta charset="utf-8"><title>Too many attempts</title><p>Too many failed sign-in attempts; try again in ${wait} seconds.</p><p><a href="/signin">Back to sign-in</a></p>`;
  return new Response(html, { status: 429, headers: { "content-type": "text/html; charset=utf-8", "retry-after": String(wait) } });
}

/** Auth.js answers a failed credentials sign-in with a redirect to the error page and sets a session cookie only on success. */
function setsSession(response: Response): boolean {
  return response.headers.getSetCookie().some((c) => /^(__Secure-)?authjs\.session-token=[^;]+/.test(c));
}

export { handler as GET, handler as POST };
