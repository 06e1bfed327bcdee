import crypto from "node:crypto";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { getAuthSecret } from "./secret";

/*
 * Secrets at rest, as channel secrets are kept (lib/notifications/crypto.ts): AES-256-GCM with a key derived
 * (HKDF-SHA256) from GATEHOUSE_SECRETS_KEY, or from the auth secret when that is unset; `purpose` keeps each kind of
 * secret under a key of its own. A copy of the database alone reveals none; the GCM tag refuses an altered ciphertext.
 */

const VERSION = "v1";

function key(purpose: string): Buffer {
  const material = getEnv().GATEHOUSE_SECRETS_KEY ?? getAuthSecret();
  return Buffer.from(crypto.hkdfSync("sha256", material, "gatehouse", purpose, 32));
}

export function sealSecret(plain: string, purpose: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv("aes-256-gcm", key(purpose), iv);
  const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
  return [VERSION, iv.toString("base64url"), cipher.getAuthTag().toString("base64url"), body.toString("base64url")].join(".");
}

export function openSecret(stored: string, purpose: string): string {
  const [version, iv, tag, body] = stored.split(".");
  if (version !== VERSION || !iv || !tag || body === undefined) throw new AppError("internal:project", "A stored secret is not in a known format.");
  try {
    const decipher = crypto.createDecipheriv("aes-256-gcm", key(purpose), Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8");
  } catch (cause) {
    throw new AppError("internal:project", "A stored secret cannot be decrypted: GATEHOUSE_SECRETS_KEY (or AUTH_SECRET) changed since it was saved. Save it again.", { cause });
  }
}
