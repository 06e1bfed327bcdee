import { getEnv } from "@/lib/env";
import { handleEventRequest } from "@/lib/executor";
import { hasExecutorKey } from "./executor-key";

/**
 * Inngest's event API, `POST /e/:key`, as both the Next route and `npm run worker` serve it: embedded mode only (with
 * Inngest Cloud / self-hosted, events go there), and only with the executor key as the event key (other apps sending
 * here set INNGEST_EVENT_KEY to it). One function, so the worker cannot drift from the route again.
 */
export async function handleKeyedEventRequest({ request, key }: { request: Request; key: string }): Promise<Response> {
  if (getEnv().executionMode !== "embedded") {
    return Response.json({ error: "Events go to Inngest: INNGEST_* settings are configured", status: 404 }, { status: 404 });
  }
  if (!hasExecutorKey(key)) {
    await request.body?.cancel().catch(() => {});
    return Response.json({ error: "Event key not recognised", status: 401 }, { status: 401 });
  }
  return handleEventRequest(request);
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
