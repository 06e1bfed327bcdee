import { route } from "@/lib/http";
import { inboxFingerprint, listInbox } from "@/lib/runs/inbox";
import { inboxEventStream } from "@/lib/dashboard/inbox-stream";

export const dynamic = "force-dynamic";

/** The caller's open inbox items live (SSE): a full snapshot first, then one each time it changes. */
export const GET = route(async ({ request, user }) => {
  const stream = inboxEventStream({
    signal: request.signal,
    source: { snapshot: () => listInbox({ user, filter: "open" }), fingerprint: inboxFingerprint },
  });
  return new Response(stream, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    },
  });
});
