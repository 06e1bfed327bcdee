import { json, readJson, route } from "@/lib/http";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { answerSchema } from "@/lib/runs/gates/answer";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { clarificationAnswered } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const { response } = await readJson(request, answerSchema);
  const clarification = await answerClarification({ user, clarificationId: params.id, response });
  await announceDecision({
    event: clarificationAnswered.create({ runId: clarification.workflowRunId, clarificationId: clarification.id }),
    key: decisionKey.clarification(clarification.id),
  });
  return json({ clarification });
});
