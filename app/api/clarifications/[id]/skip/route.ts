import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** No fields: a body, when sent, must be `{}` (and is size-capped like every other). */
const skipSchema = z.strictObject({});

/** Skip a question: "proceed with your best judgement" (recorded as CLARIFICATION_IGNORED). */
export const POST = route<{ id: string }>(async ({ request, user, params }) => {
  await rateLimit({ user, bucket: "decisions" });
  await readOptionalJson(request, skipSchema);
  return json({ clarification: await decide.skip({ user, clarificationId: params.id }) });
});
