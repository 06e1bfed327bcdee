import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/**
 * Optional body: `{ then: "proceed" }` (the default: "go on with your best judgement") or `{ then: "planning" }` (send
 * the run back to planning with the question). Size-capped like every other.
 */
const skipSchema = z.strictObject({ then: z.enum(["proceed", "planning"]).optional() });

/** Skip a question (recorded as CLARIFICATION_IGNORED): best judgement, or back to planning with the question. */
export const POST = route<{ id: string }>(async ({ request, user, params }) => {
  await rateLimit({ user, bucket: "decisions" });
  const body = await readOptionalJson(request, skipSchema);
  const then = body?.then === "planning" ? ("planning" as const) : undefined;
  return json({ clarification: await decide.skip({ user, clarificationId: params.id, then }) });
});
