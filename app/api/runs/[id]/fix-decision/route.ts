import { json, readJson, route } from "@/lib/http";
import { decideFix, fixDecisionSchema } from "@/lib/runs/gates/decide-gate";
import { announce, announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { gateDecided, runCancelled } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, fixDecisionSchema);
  const gate = await decideFix({ user, runId: params.id, input });
  await announceDecision({ event: gateDecided.create({ runId: params.id, gateId: gate.id, decision: input.decision }), key: decisionKey.gate(gate.id) });
  if (input.decision === "cancel") await announce(runCancelled.create({ runId: params.id }));
  return json({ gate });
});
