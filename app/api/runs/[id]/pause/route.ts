import { json, readOptionalJson, route } from "@/lib/http";
import { pauseSchema } from "@/lib/runs/gates/decide-run";
import { toRunDto } from "@/lib/runs/dto";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** Pause a running run at its next turn boundary (work committed, sandbox freed); POST /resume continues it. */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const { note } = await readOptionalJson(request, pauseSchema);
  const run = await decide.pause({ user, runId: params.id, note });
  return json({ run: toRunDto(run) }, { status: 202 });
});
