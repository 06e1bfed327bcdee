import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { getEnv } from "@/lib/env";
import { safeEqual } from "@/lib/auth/secret";
import { bearerCarriesKey } from "@/lib/executor/checkpoint";
import type { AppTarget } from "@/lib/executor/protocol";
import { bearerMatchesSigningKey } from "@/lib/executor/signing";

/*
 * In embedded mode Gatehouse's own app runs the Inngest SDK in dev mode (unsigned), so Gatehouse guards its own
 * executor endpoints with a key generated once into the data directory: the executor sends it on every HTTP call to
 * /api/inngest, and /e/:key only takes events sent with it. In-process calls never cross HTTP and need none.
 */

export const EXECUTOR_KEY_HEADER = "x-gatehouse-executor-key";

export function getExecutorKey(): string {
  const env = getEnv();
  // Several instances without a shared data directory (Vercel + Turso, replicas on sqld) share the key through env.
  if (env.GATEHOUSE_EXECUTOR_KEY) return env.GATEHOUSE_EXECUTOR_KEY;
  const file = path.join(env.dataDir, "executor-key");
  try {
    const existing = fs.readFileSync(file, "utf8").trim();
    if (existing.length >= 32) return existing;
  } catch {
    // not created yet
  }
  fs.mkdirSync(env.dataDir, { recursive: true });
  const key = crypto.randomBytes(32).toString("hex");
  try {
    fs.writeFileSync(file, key, { mode: 0o600, flag: "wx" });
    return key;
  } catch {
    return fs.readFileSync(file, "utf8").trim();
  }
}

/** Whether a request to Gatehouse's own executor endpoints carries the key (header or event-key path segment). */
export function hasExecutorKey(presented: string | null | undefined): boolean {
  return !!presented && safeEqual(presented, getExecutorKey());
}

/** Headers the executor sends to Gatehouse's own serve URL over HTTP. */
export function executorHeadersFor(url: string): Record<string, string> | undefined {
  const own = `${getEnv().publicUrl}/api/inngest`;
  return url.split("?")[0] === own ? { [EXECUTOR_KEY_HEADER]: getExecutorKey() } : undefined;
}

/**
 * The signing key the executor signs its calls to apps with (X-Inngest-Signature, as Inngest does), so an app served
 * in signed mode (isDev: false) syncs and runs: GATEHOUSE_EXECUTOR_SIGNING_KEY if set, otherwise the executor key
 * itself as `signkey-prod-<executor key>` — one secret: give the app INNGEST_SIGNING_KEY=signkey-prod-<executor key>.
 * Apps in dev mode ignore the signature.
 */
export function executorSigning(): Pick<AppTarget, "signingKey" | "signingKeyFallback"> {
  const env = getEnv();
  return {
    signingKey: env.GATEHOUSE_EXECUTOR_SIGNING_KEY ?? `signkey-prod-${getExecutorKey()}`,
    signingKeyFallback: env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK,
  };
}

/** An app target for `url` as the executor reaches it over HTTP: Gatehouse's own key header, and signed. */
export function executorTargetFor(url: string): AppTarget {
  return { url, headers: executorHeadersFor(url), ...executorSigning() };
}

/**
 * Whether an app's call back to the executor (checkpoints) carries a key the executor accepts: the executor key (plain,
 * or hashed as the SDK sends a signing key), or the hashed form of GATEHOUSE_EXECUTOR_SIGNING_KEY or its fallback.
 */
export function appBearerAccepted(header: string | null): boolean {
  const env = getEnv();
  return (
    bearerCarriesKey(header, getExecutorKey(), safeEqual) ||
    bearerMatchesSigningKey(header, [env.GATEHOUSE_EXECUTOR_SIGNING_KEY, env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK])
  );
}
