import { getEnv } from "@/lib/env";

type HeaderSource = { get(name: string): string | null };

/**
 * The host the browser asked for: X-Forwarded-Host when GATEHOUSE_TRUST_PROXY says a proxy sets it, else Host.
 * Without a trusted proxy a client-supplied X-Forwarded-Host is ignored (it would let a request name any origin).
 */
export function requestHost(headers: HeaderSource): string | null {
  const forwarded = getEnv().GATEHOUSE_TRUST_PROXY ? headers.get("x-forwarded-host")?.split(",")[0]?.trim() : undefined;
  return forwarded || headers.get("host");
}

/** The scheme the browser used: X-Forwarded-Proto behind a trusted proxy, else undefined. */
export function requestProto(headers: HeaderSource): "http" | "https" | undefined {
  if (!getEnv().GATEHOUSE_TRUST_PROXY) return undefined;
  const proto = headers.get("x-forwarded-proto")?.split(",")[0]?.trim();
  return proto === "http" || proto === "https" ? proto : undefined;
}

/**
 * Next's `request.url` can name a different host (e.g. localhost) than the one the browser used (127.0.0.1); Auth.js
 * builds redirects from it, and a redirect to another host loses the session cookie. Rebuild the URL from the Host
 * header the browser sent.
 */
export async function requestWithHostUrl(request: Request): Promise<Request> {
  const host = requestHost(request.headers);
  const url = new URL(request.url);
  if (!host || url.host === host) return request;
  url.host = host;
  const proto = requestProto(request.headers);
  if (proto) url.protocol = `${proto}:`;
  const hasBody = request.method !== "GET" && request.method !== "HEAD";
  return new Request(url, {
    method: request.method,
    headers: request.headers,
    body: hasBody ? await request.arrayBuffer() : undefined,
    redirect: "manual",
  });
}
