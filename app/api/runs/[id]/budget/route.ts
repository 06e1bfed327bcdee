import { json, readJson, route } from "@/lib/http";
import { budgetDecisionSchema, decideBudget } from "@/lib/runs/gates/decide-budget";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { gateDecided } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** A budget gate's decision: `{action: "raise", tokens?, costUsd?, minutes?}` or `{action: "finish_task"}` (cancel: POST /cancel). */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, budgetDecisionSchema);
  const gate = await decideBudget({ user, runId: params.id, input });
  await announceDecision({ event: gateDecided.create({ runId: params.id, gateId: gate.id, decision: input.action }), key: decisionKey.gate(gate.id) });
  return json({ gate });
});
