import { z } from "zod";
import { json, readJson, route } from "@/lib/http";
import { createApiToken, listApiTokens } from "@/lib/auth/tokens";
import { nameSchema } from "@/lib/plain-text";
import { rateLimit } from "@/lib/security/rate-limit";

export const dynamic = "force-dynamic";

const createTokenSchema = z.strictObject({
  name: nameSchema({ max: 100 }),
});

/** The caller's own API tokens (never the token values). */
export const GET = route(async ({ user }) => {
  return json({ tokens: await listApiTokens({ userId: user.id }) });
});

/** Create a token for the caller; the response is the only time the token is shown. */
export const POST = route(async ({ request, user }) => {
  const body = await readJson(request, createTokenSchema);
  await rateLimit({ user, bucket: "tokens" });
  const { id, token, name } = await createApiToken({ userId: user.id, name: body.name });
  return json({ id, name, token }, { status: 201 });
});
