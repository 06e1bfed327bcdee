import { json, readJson, route } from "@/lib/http";
import { budgetDecisionSchema } from "@/lib/runs/gates/decide-budget";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** A budget gate's decision: `{action: "raise", tokens?, costUsd?, minutes?}` or `{action: "finish_task"}` (cancel: POST /cancel). */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, budgetDecisionSchema);
  return json({ gate: await decide.budget({ user, runId: params.id, input }) });
});
