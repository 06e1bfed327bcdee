import { getEnv } from "@/lib/env";
import { handleEventRequest } from "@/lib/executor";

export const dynamic = "force-dynamic";

/** Inngest's event API, served in embedded mode only (with Inngest Cloud / self-hosted, events go there). */
export async function POST(request: Request): Promise<Response> {
  if (getEnv().executionMode !== "embedded") {
    return Response.json({ error: "Events go to Inngest: INNGEST_* settings are configured", status: 404 }, { status: 404 });
  }
  return handleEventRequest(request);
}
