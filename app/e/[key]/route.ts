import { getEnv } from "@/lib/env";
import { handleEventRequest } from "@/lib/executor";
import { hasExecutorKey } from "@/lib/security/executor-key";

export const dynamic = "force-dynamic";

/** Inngest's event API, served in embedded mode only (with Inngest Cloud / self-hosted, events go there). */
export async function POST(request: Request, { params }: { params: Promise<{ key: string }> }): Promise<Response> {
  if (getEnv().executionMode !== "embedded") {
    return Response.json({ error: "Events go to Inngest: INNGEST_* settings are configured", status: 404 }, { status: 404 });
  }
  // The event key is the executor key (see lib/security/executor-key.ts): other apps sending here set INNGEST_EVENT_KEY to it.
  if (!hasExecutorKey((await params).key)) {
    return Response.json({ error: "Event key not recognised", status: 401 }, { status: 401 });
  }
  return handleEventRequest(request);
}
