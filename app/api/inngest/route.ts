import { serve } from "inngest/next";
import { functions, inngest } from "@/inngest";
import { getEnv } from "@/lib/env";
import { SIGNATURE_HEADER, signRequest } from "@/lib/executor";
import { EXECUTOR_KEY_HEADER, hasExecutorKey, ownSigningKey } from "@/lib/security/executor-key";
import { getUserFromHeaders } from "@/lib/auth/guard";
import { errorResponse } from "@/lib/http";
import { admitInngestCall } from "@/lib/security/inngest-call";

export const dynamic = "force-dynamic";

const handlers = serve({ client: inngest, functions });

type Handler = (request: Request, context: unknown) => Promise<Response>;

/**
 * The SDK's introspection (GET). The SDK runs in signed mode, so it details only a signed GET. In embedded mode the
 * executor (its key header) and signed-in users see the details (the route signs their GET with the app's key); anyone
 * else gets `{ok}`. With Inngest, the SDK answers as it does.
 */
export const GET: Handler = async (request, context) => {
  if (getEnv().executionMode !== "embedded") return (handlers.GET as Handler)(request, context);
  if (!hasExecutorKey(request.headers.get(EXECUTOR_KEY_HEADER)) && !(await getUserFromHeaders(request.headers, new URL(request.url).origin))) {
    return Response.json({ ok: true });
  }
  const headers = new Headers(request.headers);
  // A GET has no body: the SDK checks the signature over the empty string.
  headers.set(SIGNATURE_HEADER, signRequest({ body: "", signingKey: ownSigningKey() }));
  return (handlers.GET as Handler)(new Request(request.url, { method: "GET", headers }), context);
};

/**
 * Calls that run functions (POST) or sync them (PUT). The SDK runs in signed mode in every execution mode (embedded:
 * the signing key made from the executor key; Inngest: INNGEST_SIGNING_KEY, unless INNGEST_DEV), so it verifies
 * X-Inngest-Signature itself and refuses a wrongly signed or stale call with a 401. Before it, admitInngestCall
 * refuses what it can without reading the body (no signature, a malformed or expired one, an embedded PUT that is not
 * an in-band sync) and reads the body within its cap and the budget of unverified bodies; a body that is not JSON is a
 * 400 (the SDK would throw on it). The signature itself is verified once, by the SDK.
 */
function signedCall(handler: Handler): Handler {
  return async (request, context) => {
    let admitted: Request;
    try {
      admitted = await admitInngestCall({ request, embedded: getEnv().executionMode === "embedded", signed: inngest.mode === "cloud" });
    } catch (error) {
      return errorResponse(error);
    }
    return handler(admitted, context);
  };
}

export const POST = signedCall(handlers.POST as Handler);
export const PUT = signedCall(handlers.PUT as Handler);
