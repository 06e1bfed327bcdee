import { handleKeyedEventRequest } from "@/lib/security/event-endpoint";
import { withSecurityHeaders } from "@/lib/security/headers";

export const dynamic = "force-dynamic";

/** Inngest's event API, served in embedded mode only (with Inngest Cloud / self-hosted, events go there). */
export async function POST(request: Request, { params }: { params: Promise<{ key: string }> }): Promise<Response> {
  return withSecurityHeaders(await handleKeyedEventRequest({ request, key: (await params).key }));
}
