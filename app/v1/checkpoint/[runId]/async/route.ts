import { getEnv } from "@/lib/env";
import { handleCheckpointRequest } from "@/lib/executor";
import { appBearerAccepted } from "@/lib/security/executor-key";

export const dynamic = "force-dynamic";

/**
 * Inngest's async checkpoint API (`POST /v1/checkpoint/{runId}/async`), served in embedded mode for apps whose Inngest
 * base URL points here. Gatehouse's own client reaches the same handler in-process. Callers authenticate with the
 * executor key, as the SDK sends a signing key: `Authorization: Bearer <key>` or the hashed form of
 * `INNGEST_SIGNING_KEY=signkey-<env>-<key>` (or of GATEHOUSE_EXECUTOR_SIGNING_KEY, when that is the apps' key).
 */
export async function POST(request: Request): Promise<Response> {
  if (getEnv().executionMode !== "embedded") {
    return Response.json({ error: "Checkpoints go to Inngest: INNGEST_* settings are configured", status: 404 }, { status: 404 });
  }
  if (!appBearerAccepted(request.headers.get("authorization"))) {
    return Response.json(
      { error: "Checkpoint calls need the executor key: set INNGEST_SIGNING_KEY=signkey-prod-<executor key> in the app", status: 401 },
      { status: 401 },
    );
  }
  return handleCheckpointRequest(request);
}
