import { json, readJson, route } from "@/lib/http";
import { createRunSchema, listRunsQuerySchema } from "@/lib/runs/schemas";
import { listRunsForUser, startApproaches, startRun } from "@/lib/runs/service";
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
  const { approaches, approachNotes, ...body } = await readJson(request, createRunSchema);
  if (approaches === undefined) {
    await rateLimit({ user, bucket: "runs" });
    const run = await startRun({ user, ...body });
    await announce(runStarted.create({ runId: run.id }));
    return json({ run: toRunDto(run) }, { status: 201 });
  }
  // Each approach is a run against the user's budget.
  for (let i = 0; i < approaches; i++) await rateLimit({ user, bucket: "runs" });
  const { runs, groupId } = await startApproaches({ user, ...body, approaches, approachNotes });
  for (const run of runs) await announce(runStarted.create({ runId: run.id }));
  return json({ groupId, run: toRunDto(runs[0]!), runs: runs.map(toRunDto) }, { status: 201 });
});
