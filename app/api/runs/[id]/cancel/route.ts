import { json, readOptionalJson, route } from "@/lib/http";
import { cancelSchema } from "@/lib/runs/gates/decide-run";
import { toRunDto } from "@/lib/runs/dto";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const input = await readOptionalJson(request, cancelSchema);
  const run = await decide.cancel({ user, runId: params.id, reason: input.reason });
  return json({ run: toRunDto(run) });
});
