import { route } from "@/lib/http";
import { AppError } from "@/lib/errors";
import { revokeApiToken } from "@/lib/auth/tokens";

export const dynamic = "force-dynamic";

/** Revoke one of the caller's tokens; someone else's token is 404, as if it did not exist. */
export const DELETE = route<{ id: string }>(async ({ params, user }) => {
  const revoked = await revokeApiToken({ id: params.id, userId: user.id });
  if (!revoked) throw new AppError("not_found:token", "No active token with that id.");
  return new Response(null, { status: 204 });
});
