import { json, readOptionalJson, route } from "@/lib/http";
import { resumeRun, resumeSchema } from "@/lib/runs/gates/decide-run";
import { toRunDto } from "@/lib/runs/dto";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { runResumed } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readOptionalJson(request, resumeSchema);
  const run = await resumeRun({ user, runId: params.id, action: "retry", editedPlan: input.editedPlan });
  await announceDecision({ event: runResumed.create({ runId: params.id, action: "retry" }), key: decisionKey.resume(run.lastSequence) });
  return json({ run: toRunDto(run) });
});
