import { Inngest } from "inngest";
import { getEnv } from "@/lib/env";
import { handleCheckpointRequest, handleEventRequest } from "@/lib/executor";
import { LogContextMiddleware } from "./log-context";

/**
 * The app's Inngest client. With no INNGEST_* settings (embedded mode) it is a dev-mode client whose event API is
 * Gatehouse's own /e/:key endpoint — served by the embedded executor; sends from this process skip the socket.
 * With INNGEST_EVENT_KEY / INNGEST_SIGNING_KEY / INNGEST_BASE_URL set, the SDK's standard Cloud or self-hosted
 * behaviour applies unchanged (it reads those variables itself).
 */
const env = getEnv();

/**
 * The client's transport in embedded mode: events (`/e/`) and checkpoints (`/v1/checkpoint/`) go straight to the
 * embedded executor's handlers in this process, without a socket; anything else goes out with fetch. The checkpoint
 * handler works on the database, so it serves runs driven by a worker in another process just as well.
 */
function embeddedFetch(origin: string): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(`${origin}/e/`)) return handleEventRequest(new Request(input, init));
    if (url.startsWith(`${origin}/v1/checkpoint/`)) return handleCheckpointRequest(new Request(input, init));
    return fetch(input, init);
  };
}

export const inngest =
  env.executionMode === "embedded"
    ? new Inngest({
        id: "gatehouse",
        isDev: true,
        baseUrl: env.publicUrl,
        fetch: embeddedFetch(env.publicUrl),
        // Steps run back to back in one call and are checkpointed to the embedded executor (Inngest's default, stated).
        checkpointing: true,
        middleware: [LogContextMiddleware],
      })
    : new Inngest({ id: "gatehouse", middleware: [LogContextMiddleware] });
