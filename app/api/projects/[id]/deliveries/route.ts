import { json, route } from "@/lib/http";
import { AppError, describeIssues } from "@/lib/errors";
import { deliveriesQuerySchema, listDeliveries } from "@/lib/notifications/store";

export const dynamic = "force-dynamic";

/** The project's delivery log (owners), newest first: ?limit=1..200 (50), ?runId= to narrow to one run. */
export const GET = route<{ id: string }>(async ({ request, params, user }) => {
  const parsed = deliveriesQuerySchema.safeParse(Object.fromEntries(new URL(request.url).searchParams));
  if (!parsed.success) throw new AppError("bad_request:api", describeIssues(parsed.error.issues));
  return json({ deliveries: await listDeliveries({ user, projectId: params.id, ...parsed.data }) });
});
