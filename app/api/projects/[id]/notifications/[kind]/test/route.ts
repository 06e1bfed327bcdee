import { z } from "zod";
import { json, readOptionalJson, route } from "@/lib/http";
import { sendTest } from "@/lib/notifications/dispatch";
import { parseKind } from "@/lib/notifications/store";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

/** Send a test notice on the project's channel now; answers {ok, detail} (a failure of the channel is not an error here). */
export const POST = route<{ id: string; kind: string }>(async ({ request, params, user }) => {
  // No fields; an empty body or {} (read anyway, so an oversized one is refused like everywhere else).
  await readOptionalJson(request, z.strictObject({}));
  const kind = parseKind(params.kind);
  await rateLimit({ user, bucket: "notification-tests" });
  return json(await sendTest({ user, projectId: params.id, kind }));
});
