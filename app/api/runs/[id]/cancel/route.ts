import { json, readOptionalJson, route } from "@/lib/http";
import { cancelRun, cancelSchema } from "@/lib/runs/gates/decide-run";
import { toRunDto } from "@/lib/runs/dto";
import { announce } from "@/inngest/announce";
import { runCancelled } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readOptionalJson(request, cancelSchema);
  const run = await cancelRun({ user, runId: params.id, reason: input.reason });
  await announce(runCancelled.create({ runId: params.id }));
  return json({ run: toRunDto(run) });
});
