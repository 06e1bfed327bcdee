import { json, readJson, route } from "@/lib/http";
import { createRunSchema, listRunsQuerySchema } from "@/lib/runs/schemas";
import { listRunsForUser, startRun } from "@/lib/runs/service";
import { parseQuery } from "@/lib/runs/query";
import { toRunDto } from "@/lib/runs/dto";
import { announce } from "@/inngest/announce";
import { runStarted } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const GET = route(async ({ request, user }) => {
  const query = parseQuery(request, listRunsQuerySchema);
  return json(await listRunsForUser({ user, ...query }));
});

export const POST = route(async ({ request, user }) => {
  const body = await readJson(request, createRunSchema);
  await rateLimit({ user, bucket: "runs" });
  const run = await startRun({ user, ...body });
  await announce(runStarted.create({ runId: run.id }));
  return json({ run: toRunDto(run) }, { status: 201 });
});
