import { json, readOptionalJson, route } from "@/lib/http";
import { resumeSchema } from "@/lib/runs/gates/decide-run";
import { toRunDto } from "@/lib/runs/dto";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

/**
 * The one handler of POST /retry, /resume (the same as /retry, named for runs a person paused) and /extend (more time
 * after a stage timeout). Only a retry takes `editedPlan`, the plan fixed by hand for a run paused with an invalid plan;
 * extend reads the body and leaves it aside.
 */
export function resumeHandler(action: "retry" | "extend") {
  return route<{ id: string }>(async ({ request, params, user }) => {
    await rateLimit({ user, bucket: "decisions" });
    const input = await readOptionalJson(request, resumeSchema);
    const run = await decide.resume({ user, runId: params.id, action, editedPlan: action === "retry" ? input.editedPlan : undefined });
    return json({ run: toRunDto(run) });
  });
}
