import crypto from "node:crypto";
import { getEnv } from "@/lib/env";
import { dataDirSecret, safeEqual } from "@/lib/auth/secret";
import { bearerCarriesKey } from "@/lib/executor/checkpoint";
import type { AppTarget } from "@/lib/executor/protocol";
import { bearerMatchesSigningKey, removeSigningKeyPrefix } from "@/lib/executor/signing";

/*
 * In embedded mode one secret guards Gatehouse's own executor endpoints: the executor key, generated once into the data
 * directory (or GATEHOUSE_EXECUTOR_KEY). Gatehouse's own app runs the Inngest SDK in signed mode with the signing key
 * made from it (ownSigningKey): the executor signs every call to /api/inngest (X-Inngest-Signature) and the SDK
 * verifies it; the app's checkpoint calls back carry the hashed-key bearer; its events go to /e/<executor key>.
 */

export const EXECUTOR_KEY_HEADER = "x-gatehouse-executor-key";

/**
 * The key file's content per data directory, read once per process: the key is asked for on every call the executor
 * makes and every call back (the SDK reads its signing key per request and per checkpoint), and the file is written once.
 */
const keyFiles = new Map<string, string>();

export function getExecutorKey(): string {
  const env = getEnv();
  // Several instances without a shared data directory (Vercel + Turso, replicas on sqld) share the key through env.
  if (env.GATEHOUSE_EXECUTOR_KEY) return env.GATEHOUSE_EXECUTOR_KEY;
  let key = keyFiles.get(env.dataDir);
  if (key === undefined) keyFiles.set(env.dataDir, (key = dataDirSecret({ name: "executor-key", encoding: "hex" })));
  return key;
}

/** Whether a request to Gatehouse's own executor endpoints carries the key (header or event-key path segment). */
export function hasExecutorKey(presented: string | null | undefined): boolean {
  return !!presented && safeEqual(presented, getExecutorKey());
}

/**
 * Gatehouse's own signing key: `signkey-prod-<executor key>`, so the executor key is the only secret. Inngest hashes a
 * signing key as hex for its bearer (hashSigningKey), so a key that is not hex (a GATEHOUSE_EXECUTOR_KEY of any
 * characters) is first made hex with SHA-256; the generated key and `openssl rand -hex 32` are used as they are.
 */
export function ownSigningKey(): string {
  const key = getExecutorKey();
  if (lastSigning?.key !== key) {
    lastSigning = { key, signing: `signkey-prod-${/^(?:[0-9a-f]{2})+$/i.test(key) ? key : crypto.createHash("sha256").update(key).digest("hex")}` };
  }
  return lastSigning.signing;
}
let lastSigning: { key: string; signing: string } | undefined;

function isOwnServeUrl(url: string): boolean {
  return url.split("?")[0] === `${getEnv().publicUrl}/api/inngest`;
}

/**
 * The signing key the executor signs its calls to other apps with (X-Inngest-Signature, as Inngest does), so an app
 * served in signed mode (isDev: false) syncs and runs: GATEHOUSE_EXECUTOR_SIGNING_KEY if set, otherwise Gatehouse's own
 * (ownSigningKey) — one secret: give the app INNGEST_SIGNING_KEY=<ownSigningKey()>, which for a hex executor key is
 * signkey-prod-<executor key>. Apps in dev mode ignore the signature.
 */
export function executorSigning(): Pick<AppTarget, "signingKey" | "signingKeyFallback"> {
  const env = getEnv();
  return {
    signingKey: env.GATEHOUSE_EXECUTOR_SIGNING_KEY ?? ownSigningKey(),
    signingKeyFallback: env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK,
  };
}

/**
 * An app target for `url` as the executor reaches it over HTTP, signed: Gatehouse's own serve URL always with its own
 * signing key (its SDK verifies exactly that one), any other app with executorSigning().
 */
export function executorTargetFor(url: string): AppTarget {
  return isOwnServeUrl(url) ? { url, signingKey: ownSigningKey() } : { url, ...executorSigning() };
}

/**
 * Whether an app's call back to the executor (checkpoints) carries a key the executor accepts: the executor key (plain,
 * or hashed as the SDK sends a signing key), or the hashed form of Gatehouse's own signing key (Gatehouse's own app in
 * signed mode), of GATEHOUSE_EXECUTOR_SIGNING_KEY or of its fallback.
 */
export function appBearerAccepted(header: string | null): boolean {
  const env = getEnv();
  const token = header?.replace(/^Bearer\s+/i, "").trim();
  if (!token) return false;
  if (safeEqual(token, getExecutorKey())) return true;
  // The hashed bearer under any `signkey-<env>-` prefix, of the hex form of the key (ownSigningKey): hashing a key that
  // is not hex as hex would hash nothing, and anyone could compute that bearer.
  return (
    bearerCarriesKey(header, removeSigningKeyPrefix(ownSigningKey()), safeEqual) ||
    bearerMatchesSigningKey(header, [env.GATEHOUSE_EXECUTOR_SIGNING_KEY, env.GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK])
  );
}
