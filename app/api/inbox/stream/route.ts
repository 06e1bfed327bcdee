import { route } from "@/lib/http";
import { inboxFingerprint, listInbox } from "@/lib/runs/inbox";
import { inboxEventStream } from "@/lib/dashboard/inbox-stream";
import { sseResponse } from "@/lib/dashboard/sse";

export const dynamic = "force-dynamic";

/** The caller's open inbox items live (SSE): a full snapshot first, then one each time it changes. */
export const GET = route(async ({ request, user }) => {
  const stream = inboxEventStream({
    signal: request.signal,
    source: { snapshot: () => listInbox({ user, filter: "open" }), fingerprint: inboxFingerprint },
  });
  return sseResponse(stream);
});
