import { json, route } from "@/lib/http";
import { getRunGroup } from "@/lib/runs/service";

export const dynamic = "force-dynamic";

/** The runs started together by POST /api/runs with `approaches` (only those the caller may see; 404 when none). */
export const GET = route<{ id: string }>(async ({ user, params }) => json(await getRunGroup({ user, groupId: params.id })));
