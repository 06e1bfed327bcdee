/**
 * Next's `request.url` can name a different host (e.g. localhost) than the one the browser used (127.0.0.1); Auth.js
 * builds redirects from it, and a redirect to another host loses the session cookie. Rebuild the URL from the Host
 * header the browser sent.
 */
export async function requestWithHostUrl(request: Request): Promise<Request> {
  const host = request.headers.get("x-forwarded-host") ?? request.headers.get("host");
  const url = new URL(request.url);
  if (!host || url.host === host) return request;
  url.host = host;
  const proto = request.headers.get("x-forwarded-proto");
  if (proto === "http" || proto === "https") url.protocol = `${proto}:`;
  const hasBody = request.method !== "GET" && request.method !== "HEAD";
  return new Request(url, {
    method: request.method,
    headers: request.headers,
    body: hasBody ? await request.arrayBuffer() : undefined,
    redirect: "manual",
  });
}
