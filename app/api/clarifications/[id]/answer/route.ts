import { json, readJson, route } from "@/lib/http";
import { answerSchema } from "@/lib/runs/gates/answer";
import * as decide from "@/inngest/decide";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const { response } = await readJson(request, answerSchema);
  return json({ clarification: await decide.answer({ user, clarificationId: params.id, response }) });
});
