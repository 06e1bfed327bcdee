import { json, route } from "@/lib/http";
import { getRunDetail } from "@/lib/runs/service";

export const dynamic = "force-dynamic";

export const GET = route<{ id: string }>(async ({ params, user }) => {
  return json(await getRunDetail({ user, runId: params.id }));
});
