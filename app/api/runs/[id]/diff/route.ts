import { json, route } from "@/lib/http";
import { getRunDiff } from "@/lib/runs/diff";

export const dynamic = "force-dynamic";

export const GET = route<{ id: string }>(async ({ params, user }) => json(await getRunDiff({ user, runId: params.id })));
