import { json, readJson, route } from "@/lib/http";
import { inboxActionSchema, markInboxItem } from "@/lib/runs/inbox";

export const dynamic = "force-dynamic";

/** Mark one of the caller's inbox items `read`, `unread` or `done` (for the caller only). */
export const POST = route<{ itemId: string }>(async ({ request, params, user }) => {
  const { action } = await readJson(request, inboxActionSchema);
  return json({ item: await markInboxItem({ user, itemId: params.itemId, action }) });
});
