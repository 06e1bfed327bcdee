import { z } from "zod";
import { errorMessage, type GatehouseApi } from "./api";

/*
 * The webview's only way to the server. The dashboard components in the panel call fetch("/api/…") as they do in the
 * browser; the panel's fetch hands the request to the extension host, which sends it with the token from SecretStorage.
 * The webview never sees the token, and it can reach nothing but the API's own paths on the configured server.
 */

export const bridgeRequestSchema = z.strictObject({
  type: z.literal("fetch"),
  id: z.number().int(),
  url: z
    .string()
    .max(2000)
    .refine((u) => u.startsWith("/api/") && !u.includes("..") && !u.startsWith("/api/auth/"), "must be a path under /api/ of the Gatehouse server"),
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
