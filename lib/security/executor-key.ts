import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { getEnv } from "@/lib/env";
import { safeEqual } from "@/lib/auth/secret";

/*
 * In embedded mode the Inngest SDK runs in dev mode (the executor does not sign requests), so Gatehouse guards its own
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
