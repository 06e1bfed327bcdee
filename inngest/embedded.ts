import { serve } from "inngest/next";
import { getEnv } from "@/lib/env";
import { configuredAppUrls, startExecutor, type AppTarget, type Executor, type FetchHandler } from "@/lib/executor";
import { executorTargetFor, ownSigningKey } from "@/lib/security/executor-key";
import { inngest } from "./client";
import { executorLog } from "./log-context";
import { functions } from "./index";

/**
 * Gatehouse's own app as the executor drives it: its serve URL (GATEHOUSE_PUBLIC_URL/api/inngest), signed with the
 * signing key its SDK verifies (ownSigningKey). In-process (the default transport) the executor calls the serve handler
 * directly instead of going through the socket; the call is signed and verified all the same.
 */
export function ownAppTarget({ inProcess = getEnv().GATEHOUSE_EXECUTOR_TRANSPORT === "in-process" }: { inProcess?: boolean } = {}): AppTarget {
  const url = `${getEnv().publicUrl}/api/inngest`;
  return inProcess
    ? { url, handler: serve({ client: inngest, functions }) as unknown as FetchHandler, signingKey: ownSigningKey() }
    : executorTargetFor(url);
}

/** Start the embedded executor in this process for Gatehouse's own app (plus GATEHOUSE_EXECUTOR_APPS). */
export async function startEmbeddedExecutor(): Promise<Executor> {
  // Other apps (GATEHOUSE_EXECUTOR_APPS) get signed calls, so apps in signed mode work as well as dev-mode ones.
  return startExecutor({ apps: [...configuredAppUrls().map((u) => executorTargetFor(u)), ownAppTarget()], log: executorLog });
}
