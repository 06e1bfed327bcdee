import { json, route } from "@/lib/http";
import { listEvents } from "@/lib/db/event-store";
import { listEventsQuerySchema } from "@/lib/runs/schemas";
import { parseQuery } from "@/lib/runs/query";
import { getVisibleRun } from "@/lib/runs/service";

export const dynamic = "force-dynamic";

export const GET = route<{ id: string }>(async ({ request, params, user }) => {
  const { after, limit } = parseQuery(request, listEventsQuerySchema);
  await getVisibleRun({ user, runId: params.id });
  const events = await listEvents({ runId: params.id, after, limit });
  return json({
    events: events.map((e) => ({
      sequence: e.sequence,
      type: e.type,
      payload: e.payload,
      timestamp: new Date(e.timestamp).toISOString(),
    })),
  });
});
