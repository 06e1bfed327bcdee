import { json, route } from "@/lib/http";
import { listProjectChannels } from "@/lib/notifications/store";

export const dynamic = "force-dynamic";

/** The project's notification channels (owners): config as saved, secrets only as "set". */
export const GET = route<{ id: string }>(async ({ params, user }) => {
  return json({ channels: await listProjectChannels({ user, projectId: params.id }) });
});
