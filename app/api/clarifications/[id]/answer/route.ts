import { json, readJson, route } from "@/lib/http";
import { answerClarification, answerSchema } from "@/lib/runs/decisions";
import { announce } from "@/inngest/announce";
import { clarificationAnswered } from "@/inngest/events";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const { response } = await readJson(request, answerSchema);
  const clarification = await answerClarification({ user, clarificationId: params.id, response });
  await announce(clarificationAnswered.create({ runId: clarification.workflowRunId, clarificationId: clarification.id }));
  return json({ clarification });
});
