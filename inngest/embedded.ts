import { serve } from "inngest/next";
import { getEnv } from "@/lib/env";
import { configuredAppUrls, startExecutor, type AppTarget, type Executor } from "@/lib/executor";
import { executorHeadersFor, executorTargetFor } from "@/lib/security/executor-key";
import { inngest } from "./client";
import { executorLog } from "./log-context";
import { functions } from "./index";

/**
 * Start the embedded executor in this process for Gatehouse's own app (plus GATEHOUSE_EXECUTOR_APPS). The app is
 * reached at GATEHOUSE_PUBLIC_URL/api/inngest; with the default in-process transport the executor calls the same serve
 * handler directly instead of going through the socket.
 */
export async function startEmbeddedExecutor(): Promise<Executor> {
  const env = getEnv();
  const url = `${env.publicUrl}/api/inngest`;
  const target: AppTarget =
    env.GATEHOUSE_EXECUTOR_TRANSPORT === "in-process"
      ? { url, handler: serve({ client: inngest, functions }) as unknown as (request: Request) => Promise<Response> }
      : { url, headers: executorHeadersFor(url) };
  // Other apps (GATEHOUSE_EXECUTOR_APPS) get signed calls, so apps in signed mode work as well as dev-mode ones.
  return startExecutor({ apps: [...configuredAppUrls().map((u) => executorTargetFor(u)), target], log: executorLog });
}
