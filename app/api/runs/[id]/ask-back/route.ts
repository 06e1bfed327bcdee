import { json, readJson, route } from "@/lib/http";
import { askBack, askBackSchema } from "@/lib/runs/gates/decide-gate";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { gateDecided } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** "Ask back" on a plan gate: the planner answers the question and gives a revised plan; not a rejection. */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, askBackSchema);
  const gate = await askBack({ user, runId: params.id, input });
  // Re-announced until the run acknowledges it, so it reaches a run whose wait does not look back (Inngest Cloud).
  await announceDecision({ event: gateDecided.create({ runId: params.id, gateId: gate.id, decision: "ask" }), key: decisionKey.gate(gate.id) });
  return json({ gate });
});
