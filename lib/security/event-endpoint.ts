import { getEnv } from "@/lib/env";
import { handleEventBody, handleEventRequest } from "@/lib/executor";
import { hasExecutorKey } from "./executor-key";

/**
 * Inngest's event API, `POST /e/:key`, as both the Next route and `npm run worker` serve it: embedded mode only (with
 * Inngest Cloud / self-hosted, events go there), and only with the executor key as the event key (other apps sending
 * here set INNGEST_EVENT_KEY to it). One function, so the worker cannot drift from the route again.
 */
export async function handleKeyedEventRequest({ request, key }: { request: Request; key: string }): Promise<Response> {
  const refused = refuseEventKey(key);
  if (refused) {
    await request.body?.cancel().catch(() => {});
    return refused;
  }
  return handleEventRequest(request);
}

/**
 * The same for a body the caller reads only once the key is accepted (`read` resolves to null past `limit`): the
 * worker reads it off its socket, Gatehouse's own client hands over the SDK's string, with no `Request` built.
 */
export async function handleKeyedEventBody({ key, read }: { key: string; read: (limit: number) => Promise<string | null> }): Promise<Response> {
  const refused = refuseEventKey(key);
  if (refused) return refused;
  const max = getEnv().GATEHOUSE_MAX_BODY_BYTES;
  return handleEventBody(await read(max), max);
}

/** The answer to an event call that is refused before its body is read: not embedded mode, or not the executor key. */
function refuseEventKey(key: string): Response | null {
  if (getEnv().executionMode !== "embedded") {
    return Response.json({ error: "Events go to Inngest: INNGEST_* settings are configured", status: 404 }, { status: 404 });
  }
  if (!hasExecutorKey(key)) return Response.json({ error: "Event key not recognised", status: 401 }, { status: 401 });
  return null;
}

/** The key segment of an `/e/:key` path (undefined when the path is not one). */
export function eventKeyFromPath(pathname: string): string | undefined {
  const match = /^\/e\/([^/?#]+)\/?$/.exec(pathname);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
}
