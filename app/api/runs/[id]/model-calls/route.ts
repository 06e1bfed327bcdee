import { json, route } from "@/lib/http";
import { getVisibleRun } from "@/lib/runs/service";
import { modelCallsForRun } from "@/lib/dashboard/costs";

export const dynamic = "force-dynamic";

/** Every model call of a run: stage, model, tokens, cost, latency, status. */
export const GET = route<{ id: string }>(async ({ params, user }) => {
  await getVisibleRun({ user, runId: params.id });
  return json({ modelCalls: await modelCallsForRun({ runId: params.id }) });
});
