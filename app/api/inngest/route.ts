import { serve } from "inngest/next";
import { functions, inngest } from "@/inngest";
import { getEnv } from "@/lib/env";
import { EXECUTOR_KEY_HEADER, hasExecutorKey } from "@/lib/security/executor-key";
import { getUserFromHeaders } from "@/lib/auth/guard";

export const dynamic = "force-dynamic";

const handlers = serve({ client: inngest, functions });

type Handler = (request: Request, context: unknown) => Promise<Response>;

/**
 * With Inngest Cloud / self-hosted the SDK verifies Inngest's signature itself. In embedded mode the SDK runs in dev
 * mode, so calls that run functions (POST) or register them (PUT) must carry the executor key.
 */
function guarded(handler: Handler): Handler {
  return async (request, context) => {
    if (getEnv().executionMode === "embedded" && !hasExecutorKey(request.headers.get(EXECUTOR_KEY_HEADER))) {
      return Response.json(
        { error: { code: "unauthorized:executor", message: `Only Gatehouse's executor may call this endpoint (${EXECUTOR_KEY_HEADER}).` } },
        { status: 401 },
      );
    }
    return handler(request, context);
  };
}

/**
 * The SDK's introspection (GET) lists the mode, the function count and more. In embedded mode (unsigned) only the
 * executor or a signed-in user sees it; anyone else gets `{ok}`. With Inngest, the SDK answers unsigned GETs minimally.
 */
export const GET: Handler = async (request, context) => {
  if (
    getEnv().executionMode === "embedded" &&
    !hasExecutorKey(request.headers.get(EXECUTOR_KEY_HEADER)) &&
    !(await getUserFromHeaders(request.headers, new URL(request.url).origin))
  ) {
    return Response.json({ ok: true });
  }
  return (handlers.GET as Handler)(request, context);
};
export const POST = guarded(handlers.POST as Handler);
export const PUT = guarded(handlers.PUT as Handler);
