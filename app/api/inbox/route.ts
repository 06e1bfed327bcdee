import { json, route } from "@/lib/http";
import { parseQuery } from "@/lib/runs/query";
import { inboxQuerySchema, listInbox } from "@/lib/runs/inbox";

export const dynamic = "force-dynamic";

/** The caller's inbox: the gates and questions they may decide, across their projects (`?filter=open|unread|done|all`). */
export const GET = route(async ({ request, user }) => {
  const query = parseQuery(request, inboxQuerySchema);
  return json(await listInbox({ user, ...query }));
});
