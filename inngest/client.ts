import { Inngest } from "inngest";
import { getEnv } from "@/lib/env";
import { handleEventRequest } from "@/lib/executor";

/**
 * The app's Inngest client. With no INNGEST_* settings (embedded mode) it is a dev-mode client whose event API is
 * Gatehouse's own /e/:key endpoint — served by the embedded executor; sends from this process skip the socket.
 * With INNGEST_EVENT_KEY / INNGEST_SIGNING_KEY / INNGEST_BASE_URL set, the SDK's standard Cloud or self-hosted
 * behaviour applies unchanged (it reads those variables itself).
 */
const env = getEnv();

function embeddedFetch(eventPrefix: string): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(eventPrefix)) return handleEventRequest(new Request(input, init));
    return fetch(input, init);
  };
}

export const inngest =
  env.executionMode === "embedded"
    ? new Inngest({
        id: "gatehouse",
        isDev: true,
        baseUrl: env.publicUrl,
        fetch: embeddedFetch(`${env.publicUrl}/e/`),
      })
    : new Inngest({ id: "gatehouse" });
