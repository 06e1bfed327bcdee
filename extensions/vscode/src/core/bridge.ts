import { z } from "zod";
import { errorMessage, type GatehouseApi } from "./api";

/*
 * The webview's only way to the server. The dashboard components in the panel call fetch("/api/…") as they do in the
 * browser; the panel's fetch hands the request to the extension host, which sends it with the token from SecretStorage.
 * The webview never sees the token, and it can reach nothing but the API's own paths on the configured server.
 */

const BASE = "http://bridge.invalid";
/** Encoded `.`, `/`, `\` or `%` in the path: a server that decodes them may route to another path than the one checked. */
const ENCODED_SEPARATOR = /%(?:2e|2f|5c|25)/i;

/**
 * The panel's URL as the path and query the server will route, or null when that is not an API path. A URL parser
 * resolves `..` and its encodings (`%2e%2e`) and reads `\` as `/`, so `"/api/%2e%2e/settings"` reaches `/settings`:
 * the path is checked as the server will see it. It must already be in that form (no dot segments, no `\`, nothing
 * else the parser would rewrite), and neither it nor its decoded form may leave /api/ or enter /api/auth/.
 */
export function bridgeApiPath(url: string): string | null {
  if (!url.startsWith("/") || url.startsWith("//") || /[\u0000-\u001f\u007f]/.test(url)) return null;
  const path = url.split(/[?#]/, 1)[0]!;
  if (ENCODED_SEPARATOR.test(path)) return null;
  let resolved: URL;
  let decoded: string;
  try {
    resolved = new URL(url, BASE);
    decoded = decodeURIComponent(resolved.pathname);
  } catch {
    return null;
  }
  if (resolved.origin !== BASE || resolved.pathname !== path) return null;
  for (const p of [resolved.pathname, decoded]) {
    if (!p.startsWith("/api/") || p === "/api/auth" || p.startsWith("/api/auth/")) return null;
  }
  return `${resolved.pathname}${resolved.search}`;
}

export const bridgeRequestSchema = z.strictObject({
  type: z.literal("fetch"),
  id: z.number().int(),
  // What is sent is the checked form, not the string the panel gave.
  url: z
    .string()
    .max(2000)
    .transform((u, ctx) => bridgeApiPath(u) ?? (ctx.addIssue({ code: "custom", message: "must be a path under /api/ of the Gatehouse server" }), z.NEVER)),
  method: z.enum(["GET", "POST", "PATCH", "PUT", "DELETE"]).default("GET"),
  body: z.string().max(2_000_000).optional(),
});

export type BridgeResponse = { type: "fetch-result"; id: number; status: number; body: string; contentType: string };

/** Answer one request from the webview; a request that is not allowed gets a 400 in the API's error shape. */
export async function bridgeFetch({ api, message }: { api: GatehouseApi; message: unknown }): Promise<BridgeResponse> {
  const id = typeof (message as { id?: unknown })?.id === "number" ? (message as { id: number }).id : -1;
  const parsed = bridgeRequestSchema.safeParse(message);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const body = JSON.stringify({ error: { code: "invalid:bridge", message: `The panel's request was refused: ${issue.path.join(".") || "request"} ${issue.message}.` } });
    return { type: "fetch-result", id, status: 400, body, contentType: "application/json" };
  }
  const { url, method, body } = parsed.data;
  try {
    const response = await api.client.fetch(url, { method, body, headers: body === undefined ? {} : { "content-type": "application/json" } });
    return { type: "fetch-result", id, status: response.status, body: await response.text(), contentType: response.headers.get("content-type") ?? "application/json" };
  } catch (error) {
    const text = JSON.stringify({ error: { code: "unavailable:server", message: errorMessage(error) } });
    return { type: "fetch-result", id, status: 503, body: text, contentType: "application/json" };
  }
}
