import { json, readJson, route } from "@/lib/http";
import { askBackSchema } from "@/lib/runs/gates/decide-gate";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** "Ask back" on a plan gate: the planner answers the question and gives a revised plan; not a rejection. */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, askBackSchema);
  return json({ gate: await decide.askBack({ user, runId: params.id, input }) });
});
