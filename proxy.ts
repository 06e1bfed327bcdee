import { NextResponse, type NextRequest } from "next/server";
import { getEnv } from "@/lib/env";
import { BASE_SECURITY_HEADERS, newNonce, pageCsp } from "@/lib/security/headers";

/**
 * Pages learn which path was asked for (Server Components are not told), so that signing in returns you there, and
 * every page gets a Content-Security-Policy with its own nonce: Next reads it from the request's CSP header and puts
 * it on the inline scripts it writes; the root layout hands it to next-themes for its one script.
 * Authentication and authorization are checked by each page and route handler, not here.
 */
export function proxy(request: NextRequest) {
  const nonce = newNonce();
  const csp = pageCsp({ nonce, dev: getEnv().NODE_ENV === "development" });
  const headers = new Headers(request.headers);
  headers.set("x-gatehouse-path", `${request.nextUrl.pathname}${request.nextUrl.search}`);
  headers.set("x-nonce", nonce);
  headers.set("content-security-policy", csp);
  const response = NextResponse.next({ request: { headers } });
  response.headers.set("content-security-policy", csp);
  for (const [name, value] of Object.entries(BASE_SECURITY_HEADERS)) response.headers.set(name, value);
  return response;
}

// API routes, the event and checkpoint endpoints and static files get their headers from next.config.ts and route();
// pages all come here. The endpoints that take bodies must stay out: for a request the proxy sees, Next first copies
// the body (up to 10 MB, cutting the rest), before the route can check who sends it.
export const config = { matcher: ["/((?!api/|_next/static|_next/image|e/|v1/|favicon.ico|icon.svg|icon.png).*)"] };
