import { json, readJson, route } from "@/lib/http";
import { deleteProjectChannel, parseKind, saveChannelSchema, saveProjectChannel } from "@/lib/notifications/store";

export const dynamic = "force-dynamic";

/** Create or replace the project's channel of this kind (owners). An omitted secret keeps the stored one. */
export const PUT = route<{ id: string; kind: string }>(async ({ request, params, user }) => {
  const kind = parseKind(params.kind);
  const input = await readJson(request, saveChannelSchema);
  return json({ channel: await saveProjectChannel({ user, projectId: params.id, kind, input }) });
});

export const DELETE = route<{ id: string; kind: string }>(async ({ params, user }) => {
  const kind = parseKind(params.kind);
  return json(await deleteProjectChannel({ user, projectId: params.id, kind }));
});
