import { route } from "@/lib/http";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { getVisibleRun } from "@/lib/runs/service";
import { resumeAfter, runEventStream, sseResponse } from "@/lib/dashboard/sse";

export const dynamic = "force-dynamic";

const PAGE = 200;

/** Live event log of a run as server-sent events (`id:` = sequence; resumes after Last-Event-ID; ends when terminal). */
export const GET = route<{ id: string }>(async ({ request, params, user }) => {
  await getVisibleRun({ user, runId: params.id });
  const runId = params.id;
  const stream = runEventStream({
    after: resumeAfter(request),
    signal: request.signal,
    source: {
      async events(after) {
        const events = await listEvents({ runId, after, limit: PAGE });
        return events.map((e) => ({
          sequence: e.sequence,
          type: e.type,
          payload: e.payload,
          timestamp: new Date(e.timestamp).toISOString(),
        }));
      },
      async state() {
        const run = await getRunState({ id: runId });
        return run ? { status: run.status, lastSequence: run.lastSequence } : null;
      },
    },
  });
  return sseResponse(stream);
});
