import { json, readJson, route } from "@/lib/http";
import { createRunSchema, listRunsQuerySchema } from "@/lib/runs/schemas";
import { listRunsForUser, startRun } from "@/lib/runs/service";
import { parseQuery } from "@/lib/runs/query";
import { toRunDto } from "@/lib/runs/dto";

export const dynamic = "force-dynamic";

export const GET = route(async ({ request, user }) => {
  const query = parseQuery(request, listRunsQuerySchema);
  return json(await listRunsForUser({ user, ...query }));
});

export const POST = route(async ({ request, user }) => {
  const body = await readJson(request, createRunSchema);
  const run = await startRun({ user, ...body });
  return json({ run: toRunDto(run) }, { status: 201 });
});
