import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import { skipClarification } from "@/lib/runs/gates/decide-clarification";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { clarificationAnswered } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** No fields: a body, when sent, must be `{}` (and is size-capped like every other). */
const skipSchema = z.strictObject({});

/** Skip a question: "proceed with your best judgement" (recorded as CLARIFICATION_IGNORED). */
export const POST = route<{ id: string }>(async ({ request, user, params }) => {
  await rateLimit({ user, bucket: "decisions" });
  await readOptionalJson(request, skipSchema);
  const clarification = await skipClarification({ user, clarificationId: params.id });
  await announceDecision({
    event: clarificationAnswered.create({ runId: clarification.workflowRunId, clarificationId: clarification.id }),
    key: decisionKey.clarification(clarification.id),
  });
  return json({ clarification });
});
