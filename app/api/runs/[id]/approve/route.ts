import { json, readJson, route } from "@/lib/http";
import { approveSchema } from "@/lib/runs/gates/decide-gate";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readJson(request, approveSchema);
  return json({ gate: await decide.approve({ user, runId: params.id, input }) });
});
