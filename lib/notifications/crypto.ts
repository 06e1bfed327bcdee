import crypto from "node:crypto";
import { getEnv } from "@/lib/env";
import { getAuthSecret } from "@/lib/auth/secret";
import { AppError } from "@/lib/errors";

/*
 * Channel secrets at rest: AES-256-GCM with a key derived (HKDF-SHA256) from GATEHOUSE_SECRETS_KEY, or from the auth
 * secret when that is unset, so a fresh install needs no set-up. A copy of the database alone reveals no token; the
 * GCM tag refuses a ciphertext that was altered or encrypted under another key.
 */

const VERSION = "v1";

function key(): Buffer {
  const material = getEnv().GATEHOUSE_SECRETS_KEY ?? getAuthSecret();
  return Buffer.from(crypto.hkdfSync("sha256", material, "gatehouse", "notification-channel-secrets", 32));
}

export function encryptSecret(plain: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv("aes-256-gcm", key(), iv);
  const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
  return [VERSION, iv.toString("base64url"), cipher.getAuthTag().toString("base64url"), body.toString("base64url")].join(".");
}

export function decryptSecret(stored: string): string {
  const [version, iv, tag, body] = stored.split(".");
  if (version !== VERSION || !iv || !tag || body === undefined) {
    throw new AppError("internal:notification", "A stored channel secret is not in a known format.");
  }
  try {
    const decipher = crypto.createDecipheriv("aes-256-gcm", key(), Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8");
  } catch (cause) {
    throw new AppError(
      "internal:notification",
      "A stored channel secret cannot be decrypted: GATEHOUSE_SECRETS_KEY (or AUTH_SECRET) changed since it was saved. Save the channel's secret again.",
      { cause },
    );
  }
}

/**
 * A token derived from the same key for one purpose and one id (a Telegram bot's webhook secret_token for its channel):
 * nothing to store, the same on every replica, different per channel. Telegram allows 1-256 of [A-Za-z0-9_-].
 */
export function derivedToken({ purpose, id }: { purpose: string; id: string }): string {
  return crypto.createHmac("sha256", key()).update(`${purpose}:${id}`).digest("base64url");
}
