import { json, readJson, route } from "@/lib/http";
import { deletePersonalChannel, parsePersonalKind, savePersonalChannel, savePersonalSchema } from "@/lib/notifications/store";

export const dynamic = "force-dynamic";

/** Set the caller's own email or Telegram chat for decision notices (only ever their own). */
export const PUT = route<{ channel: string }>(async ({ request, params, user }) => {
  const kind = parsePersonalKind(params.channel);
  const input = await readJson(request, savePersonalSchema);
  return json({ channel: await savePersonalChannel({ user, kind, input }) });
});

export const DELETE = route<{ channel: string }>(async ({ params, user }) => {
  const kind = parsePersonalKind(params.channel);
  return json(await deletePersonalChannel({ user, kind }));
});
