import { Inngest } from "inngest";
import { getEnv } from "@/lib/env";
import { handleCheckpointBody, handleCheckpointRequest } from "@/lib/executor";
import { eventKeyFromPath, handleKeyedEventBody, handleKeyedEventRequest } from "@/lib/security/event-endpoint";
import { appBearerAccepted, getExecutorKey, ownSigningKey } from "@/lib/security/executor-key";
import { LogContextMiddleware } from "./log-context";

/**
 * The app's Inngest client. With no INNGEST_* settings (embedded mode) it runs in signed mode against Gatehouse's own
 * event and checkpoint API (GATEHOUSE_PUBLIC_URL), exactly as an app on Inngest Cloud does: its signing key is made from
 * the executor key (ownSigningKey; one secret), so the serve handler verifies X-Inngest-Signature on every call, its
 * checkpoint calls carry the hashed-key bearer, and its events go to /e/<executor key>. Sends and checkpoints from this
 * process skip the socket but pass the same checks. With INNGEST_EVENT_KEY / INNGEST_SIGNING_KEY / INNGEST_BASE_URL
 * set, the SDK's standard Cloud or self-hosted behaviour applies unchanged (it reads those variables itself).
 */
const env = getEnv();

/**
 * The client's transport in embedded mode: events (`/e/`) and checkpoints (`/v1/checkpoint/`) go straight to the
 * embedded executor's handlers in this process, without a socket, with the checks of their HTTP routes (the event key,
 * the hashed-key bearer); anything else goes out with fetch. The checkpoint handler works on the database, so it serves
 * runs driven by a worker in another process just as well. The SDK sends both as a string body with plain headers:
 * that string is handed over as is (no `Request` built around it, no stream read back), with the same caps.
 */
export function embeddedFetch(origin: string): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(`${origin}/`)) return fetch(input, init);
    const { pathname } = new URL(url);
    const key = eventKeyFromPath(pathname);
    const isCheckpoint = key === undefined && pathname.startsWith("/v1/checkpoint/");
    if (key === undefined && !isCheckpoint) return fetch(input, init);
    const text = !(input instanceof Request) && typeof init?.body === "string" ? init.body : undefined;
    if (text === undefined) {
      const request = new Request(input, init);
      if (key !== undefined) return handleKeyedEventRequest({ request, key });
      if (!appBearerAccepted(request.headers.get("authorization"))) return checkpointRefused();
      return handleCheckpointRequest(request);
    }
    if (key !== undefined) return handleKeyedEventBody({ key, read: async () => text });
    if (!appBearerAccepted(headerOf(init?.headers, "authorization"))) return checkpointRefused();
    return handleCheckpointBody({ url, method: init?.method ?? "GET", read: async () => text });
  };
}

function checkpointRefused(): Response {
  return Response.json({ error: "Checkpoint calls need the app's hashed signing key as bearer", status: 401 }, { status: 401 });
}

/** One header of a fetch `init` (a Headers, a list of pairs, or a plain object, as the SDK passes), by name. */
function headerOf(headers: HeadersInit | undefined, name: string): string | null {
  if (!headers) return null;
  if (headers instanceof Headers) return headers.get(name);
  const wanted = name.toLowerCase();
  const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
  for (const [k, v] of pairs) if (k.toLowerCase() === wanted) return v;
  return null;
}

export const inngest =
  env.executionMode === "embedded"
    ? new Inngest({
        id: "gatehouse",
        isDev: false,
        // Getters, read by the SDK when a key is first needed (it keeps the options object as given): importing this
        // module, as `next build` does, must not create the executor key file.
        get signingKey() {
          return ownSigningKey();
        },
        get eventKey() {
          return getExecutorKey();
        },
        baseUrl: env.publicUrl,
        fetch: embeddedFetch(env.publicUrl),
        // Steps run back to back in one call and are checkpointed to the embedded executor (Inngest's default, stated).
        checkpointing: true,
        middleware: [LogContextMiddleware],
      })
    : new Inngest({ id: "gatehouse", middleware: [LogContextMiddleware] });
