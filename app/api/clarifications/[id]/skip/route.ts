import { json, route } from "@/lib/http";
import { skipClarification } from "@/lib/runs/decisions";
import { announce } from "@/inngest/announce";
import { clarificationAnswered } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** Skip a question: "proceed with your best judgement" (recorded as CLARIFICATION_IGNORED). */
export const POST = route<{ id: string }>(async ({ user, params }) => {
  await rateLimit({ user, bucket: "decisions" });
  const clarification = await skipClarification({ user, clarificationId: params.id });
  await announce(clarificationAnswered.create({ runId: clarification.workflowRunId, clarificationId: clarification.id }));
  return json({ clarification });
});
