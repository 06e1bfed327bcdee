import { json, readJson, route } from "@/lib/http";
import { approveGate, approveSchema } from "@/lib/runs/gates/decide-gate";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { gateDecided } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, approveSchema);
  const gate = await approveGate({ user, runId: params.id, input });
  await announceDecision({ event: gateDecided.create({ runId: params.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
  return json({ gate });
});
