/*
 * Security headers for every page and API response. Pages get a Content-Security-Policy with a fresh nonce per request
 * (set by proxy.ts; Next reads the nonce from the request's CSP header and puts it on its own inline scripts), API and
 * other non-HTML responses a policy that allows nothing at all. No imports: next.config.ts loads this file too.
 */

/** Headers every response carries. */
export const BASE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
  "cross-origin-opener-policy": "same-origin",
};

/** JSON, SSE and other non-document responses: nothing may load, nothing may frame it. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

/**
 * The page policy. Scripts: only those carrying this request's nonce, and what they load ('strict-dynamic': Next's
 * chunks, the lazily loaded mermaid). Development adds 'unsafe-eval', which React's dev tooling needs. Images only from
 * this site or data: URLs — so an <img> smuggled into a diagram label cannot call out.
 */
export function pageCsp({ nonce, dev }: { nonce: string; dev: boolean }): string {
  return [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'${dev ? " 'unsafe-eval'" : ""}`,
    // Inline style attributes come from React and from mermaid's SVG (<style> inside the diagram).
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src 'self'${dev ? " ws: wss:" : ""}`,
    "object-src 'none'",
    "base-uri 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** A random nonce for one page response. */
export function newNonce(): string {
  return btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
}

/** Add the base headers (and the API policy unless one is set) to a response; copies it when its headers are immutable. */
export function withSecurityHeaders(response: Response): Response {
  const apply = (headers: Headers) => {
    for (const [name, value] of Object.entries(BASE_SECURITY_HEADERS)) if (!headers.has(name)) headers.set(name, value);
    if (!headers.has("content-security-policy")) headers.set("content-security-policy", API_CSP);
  };
  try {
    apply(response.headers);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    apply(copy.headers);
    return copy;
  }
}
