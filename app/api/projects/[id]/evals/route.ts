import { json, route } from "@/lib/http";
import { requireProjectRole } from "@/lib/auth/guard";
import { AppError } from "@/lib/errors";
import { getEnv } from "@/lib/env";
import { listEvalReports } from "@/lib/evals/results";

export const dynamic = "force-dynamic";

/**
 * The project's kept eval rounds (`npm run eval -- … --project <id>` or `--from-history <id>`), newest first, each with
 * its routings' totals and per-task rows. ?limit=1..100 (20). Anyone who may read the project may read them.
 */
export const GET = route<{ id: string }>(async ({ request, params, user }) => {
  await requireProjectRole({ user, projectId: params.id, action: "read" });
  const raw = new URL(request.url).searchParams.get("limit");
  const limit = raw === null ? 20 : Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new AppError("bad_request:api", "limit must be a whole number from 1 to 100.");
  return json({ evals: listEvalReports({ dataDir: getEnv().dataDir, projectId: params.id, limit }) });
});
