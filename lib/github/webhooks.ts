import crypto from "node:crypto";
import { eq, inArray } from "drizzle-orm";
import { write } from "@/lib/db";
import { githubDeliveries } from "@/lib/db/schema";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { discardBody, readUnverifiedBody } from "@/lib/body";
import { redactDeep } from "@/lib/redact";

/*
 * Receiving GitHub webhooks: the X-Hub-Signature-256 HMAC over the exact bytes received, compared in constant time,
 * and each X-GitHub-Delivery stored once so a redelivery has no second effect. A replay of the same signed body under
 * a new delivery id is caught by a hash of the body, kept as a marker row `sha256:<hex>` beside the delivery (the
 * pattern of real delivery ids, [A-Za-z0-9-], cannot collide with it).
 */

export function signPayload(secret: string, payload: string | Buffer): string {
  return `sha256=${crypto.createHmac("sha256", secret).update(payload).digest("hex")}`;
}

/** Constant-time check of `sha256=<hex>` against the HMAC of the raw body. */
export function verifySignature({ secret, payload, signature }: { secret: string; payload: string | Buffer; signature: string | null }): boolean {
  if (!signature || !/^sha256=[0-9a-f]{64}$/i.test(signature.trim())) return false;
  const expected = Buffer.from(signPayload(secret, payload), "utf8");
  const given = Buffer.from(signature.trim().toLowerCase(), "utf8");
  return expected.length === given.length && crypto.timingSafeEqual(expected, given);
}

/**
 * Read the raw body while computing its HMAC, within GATEHOUSE_WEBHOOK_MAX_BYTES (413 by Content-Length up front or as
 * soon as the stream passes it) and the process-wide budget of unverified bodies (503 with Retry-After).
 */
async function readSigned({ request, secret }: { request: Request; secret: string }): Promise<{ raw: Buffer; hmac: string }> {
  const mac = crypto.createHmac("sha256", secret);
  const raw = await readUnverifiedBody({
    request,
    limit: getEnv().GATEHOUSE_WEBHOOK_MAX_BYTES,
    surface: "github",
    what: "The webhook body (GATEHOUSE_WEBHOOK_MAX_BYTES)",
    onChunk: (chunk) => mac.update(chunk),
  });
  return { raw, hmac: `sha256=${mac.digest("hex")}` };
}

function signatureMatches(expected: string, signature: string): boolean {
  const a = Buffer.from(expected, "utf8");
  const b = Buffer.from(signature.trim().toLowerCase(), "utf8");
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

export type ReceivedWebhook = {
  deliveryId: string;
  event: string;
  action: string | null;
  payload: Record<string, unknown>;
  /** sha256 of the signed body, for the replay guard. */
  bodyHash: string;
};

/** Verify and parse a webhook request. 401 for a missing or wrong signature, 400 for a malformed one. */
export async function receiveWebhook(request: Request): Promise<ReceivedWebhook> {
  const secret = getEnv().GITHUB_APP_WEBHOOK_SECRET;
  if (!secret) throw new AppError("unavailable:github", "GitHub webhooks are not configured on this server (GITHUB_APP_WEBHOOK_SECRET).");
  // A request without a well-formed signature is refused before a byte of its body is read.
  const signature = request.headers.get("x-hub-signature-256");
  if (!signature || !/^sha256=[0-9a-f]{64}$/i.test(signature.trim())) {
    await discardBody(request);
    throw new AppError("unauthorized:github", "The webhook signature (X-Hub-Signature-256) is missing or malformed.");
  }
  const { raw, hmac } = await readSigned({ request, secret });
  if (!signatureMatches(hmac, signature)) {
    throw new AppError("unauthorized:github", "The webhook signature (X-Hub-Signature-256) does not match.");
  }
  const deliveryId = request.headers.get("x-github-delivery")?.trim();
  const event = request.headers.get("x-github-event")?.trim();
  if (!deliveryId || !/^[A-Za-z0-9-]{1,100}$/.test(deliveryId)) throw new AppError("bad_request:github", "X-GitHub-Delivery is missing or malformed.");
  if (!event || !/^[a-z_]{1,100}$/.test(event)) throw new AppError("bad_request:github", "X-GitHub-Event is missing or malformed.");
  let payload: unknown;
  try {
    payload = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new AppError("bad_request:github", "The webhook body is not JSON (configure the app's webhook content type as application/json).");
  }
  if (!payload || typeof payload !== "object" || Array.isArray(payload)) throw new AppError("bad_request:github", "The webhook body is not a JSON object.");
  const action = typeof (payload as { action?: unknown }).action === "string" ? ((payload as { action: string }).action) : null;
  const bodyHash = crypto.createHash("sha256").update(raw).digest("hex");
  return { deliveryId, event, action, payload: payload as Record<string, unknown>, bodyHash };
}

/**
 * Store a delivery and the hash of its body in one write; false when the delivery id or the same signed body was seen
 * before (nothing is changed then).
 */
export async function recordDelivery(delivery: ReceivedWebhook): Promise<boolean> {
  const marker = bodyMarker(delivery.bodyHash);
  return write(async (tx) => {
    const seen = await tx
      .select({ id: githubDeliveries.id })
      .from(githubDeliveries)
      .where(inArray(githubDeliveries.id, [delivery.deliveryId, marker]))
      .limit(1);
    if (seen.length) return false;
    await tx.insert(githubDeliveries).values([
      // Redacted before it is stored: a signed payload can still carry a key (a PR body, a comment); handlers read this.
      { id: delivery.deliveryId, event: delivery.event, action: delivery.action, payload: redactDeep(delivery.payload) },
      { id: marker, event: "replay-guard", action: null, payload: { deliveryId: delivery.deliveryId }, outcome: "body hash of a delivery", processedAt: new Date() },
    ]);
    return true;
  });
}

const bodyMarker = (hash: string) => `sha256:${hash}`;

/** Undo recordDelivery when the work could not be queued, so GitHub's redelivery is not taken for a replay. */
export async function forgetDelivery(delivery: ReceivedWebhook) {
  await write(async (tx) => {
    await tx.delete(githubDeliveries).where(inArray(githubDeliveries.id, [delivery.deliveryId, bodyMarker(delivery.bodyHash)]));
  });
}
