import crypto from "node:crypto";
import { getAuthSecret } from "./secret";

/**
 * A device cookie (OWASP's answer to lock-out by strangers): a browser that has signed in as the owner gets a signed,
 * random id. Its later sign-in attempts are throttled on their own, so failures from elsewhere cannot keep it out.
 * It proves only that this browser once signed in; it signs nobody in.
 */
export const DEVICE_COOKIE = "gatehouse-device";
const MAX_AGE_SECONDS = 365 * 24 * 60 * 60;

const mac = (account: string, id: string) =>
  crypto.createHmac("sha256", getAuthSecret()).update(`device:${account}:${id}`).digest("base64url");

/** The Set-Cookie value for a new device of `account` (sent only to the sign-in callback). */
export function newDeviceCookie({ account, secure }: { account: string; secure: boolean }): string {
  const id = crypto.randomBytes(16).toString("base64url");
  return [
    `${DEVICE_COOKIE}=${id}.${mac(account, id)}`,
    "Path=/api/auth/callback",
    `Max-Age=${MAX_AGE_SECONDS}`,
    "HttpOnly",
    "SameSite=Lax",
    ...(secure ? ["Secure"] : []),
  ].join("; ");
}

/** The id of a valid device cookie for `account` in these headers, or null. */
export function deviceFrom(headers: { get(name: string): string | null }, account: string): string | null {
  const cookie = headers.get("cookie") ?? "";
  for (const part of cookie.split(";")) {
    const [name, value = ""] = part.trim().split("=", 2);
    if (name !== DEVICE_COOKIE) continue;
    const [id = "", signature = ""] = value.split(".");
    if (!/^[\w-]{22}$/.test(id)) continue;
    const expected = mac(account, id);
    if (signature.length === expected.length && crypto.timingSafeEqual(Buffer.from(signature), Buffer.from(expected))) return id;
  }
  return null;
}
