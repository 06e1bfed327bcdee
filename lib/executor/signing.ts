import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import canonicalize from "canonicalize";

/**
 * Inngest's request signing, as the SDK verifies it (inngest-js InngestCommHandler `RequestSignature` and
 * helpers/net.ts `signDataWithKey`): `X-Inngest-Signature: t=<unix seconds>&s=<hex HMAC-SHA256>`, keyed with the
 * signing key without its `signkey-<env>-` prefix (as UTF-8 text), over the JSON-canonicalized (RFC 8785) body
 * followed by the timestamp. The SDK parses the body and canonicalizes it before checking, so the executor sends the
 * canonical text itself: what it signs is byte for byte what it sends.
 */

export const SIGNATURE_HEADER = "x-inngest-signature";

export function removeSigningKeyPrefix(key: string): string {
  return key.replace(/^signkey-\w+-/, "");
}

/** The canonical JSON text of a body (what is sent and signed). */
export function canonicalBody(body: unknown): string {
  return canonicalize(body) ?? "null";
}

/** The X-Inngest-Signature value for `body` (the exact text sent) at `now` (ms). */
export function signRequest({ body, signingKey, now = Date.now() }: { body: string; signingKey: string; now?: number }): string {
  const ts = String(Math.round(now / 1000));
  const mac = createHmac("sha256", removeSigningKeyPrefix(signingKey)).update(body).update(ts).digest("hex");
  return `t=${ts}&s=${mac}`;
}

/**
 * The bearer an app sends back with the same key (its checkpoint and event calls): the SDK's `hashSigningKey`, the
 * prefix kept and the rest hex-decoded and hashed with SHA-256.
 */
export function hashSigningKey(signingKey: string): string {
  const prefix = /^signkey-\w+-/.exec(signingKey)?.[0] ?? "";
  return `${prefix}${createHash("sha256").update(Buffer.from(removeSigningKeyPrefix(signingKey), "hex")).digest("hex")}`;
}

/**
 * Whether `header` is `Bearer <hashSigningKey(key)>` for one of `keys` (compared in constant time). A key that is not
 * hex is skipped: the SDK hashes it as hex, which reads nothing, so its bearer would be the same for every such key.
 */
export function bearerMatchesSigningKey(header: string | null, keys: (string | undefined)[]): boolean {
  const token = header?.replace(/^Bearer\s+/i, "").trim();
  if (!token) return false;
  const presented = Buffer.from(token);
  return keys.some((key) => {
    if (!key || !/^(?:[0-9a-f]{2})+$/i.test(removeSigningKeyPrefix(key))) return false;
    const expected = Buffer.from(hashSigningKey(key));
    return expected.length === presented.length && timingSafeEqual(expected, presented);
  });
}

/** How far a signature's timestamp may be from now, either way: the SDK's RequestSignature.hasExpired. */
export const SIGNATURE_TOLERANCE_MS = 5 * 60_000;

/**
 * The parts of an X-Inngest-Signature that is well formed (`t=<unix seconds>&s=<64 hex>`) and not expired at `now`,
 * else null. A cheap check of the header alone, made before the body it signs is read.
 */
export function parseSignatureHeader(header: string | null, now = Date.now()): { t: string; s: string } | null {
  if (!header || header.length > 200) return null;
  const params = new URLSearchParams(header.trim());
  const t = params.get("t") ?? "";
  const s = params.get("s") ?? "";
  if ([...params.keys()].some((k) => k !== "t" && k !== "s")) return null;
  if (!/^\d{1,12}$/.test(t) || !/^[0-9a-f]{64}$/i.test(s)) return null;
  if (Math.abs(now - Number(t) * 1000) > SIGNATURE_TOLERANCE_MS) return null;
  return { t, s: s.toLowerCase() };
}

/**
 * Whether `header` signs `body` with one of `signingKeys`, exactly as the SDK checks it: `body` is the parsed JSON body
 * ("" for none), canonicalized (a JSON string is signed as the string itself), the timestamp appended, compared in
 * constant time, within SIGNATURE_TOLERANCE_MS of `now`.
 */
export function verifyRequestSignature({
  body,
  header,
  signingKeys,
  now = Date.now(),
}: {
  body: unknown;
  header: string | null;
  signingKeys: (string | undefined)[];
  now?: number;
}): boolean {
  const parsed = parseSignatureHeader(header, now);
  if (!parsed) return false;
  const data = typeof body === "string" ? body : canonicalBody(body);
  const given = Buffer.from(parsed.s, "hex");
  return signingKeys.some((key) => {
    if (!key) return false;
    const expected = createHmac("sha256", removeSigningKeyPrefix(key)).update(data).update(parsed.t).digest();
    return expected.length === given.length && timingSafeEqual(expected, given);
  });
}
