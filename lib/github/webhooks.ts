import crypto from "node:crypto";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { githubDeliveries } from "@/lib/db/schema";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { readBodyLimited } from "@/lib/http";

/*
 * Receiving GitHub webhooks: the X-Hub-Signature-256 HMAC over the exact bytes received, compared in constant time,
 * and each X-GitHub-Delivery stored once so a redelivery (or a replayed request) has no second effect.
 */

/** GitHub's payloads are capped at 25 MB. */
const MAX_PAYLOAD_BYTES = 25 * 1024 * 1024;

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

export function readRawBody(request: Request): Promise<Buffer> {
  return readBodyLimited(request, MAX_PAYLOAD_BYTES, () => new AppError("payload_too_large:github"));
}

export type ReceivedWebhook = { deliveryId: string; event: string; action: string | null; payload: Record<string, unknown> };

/** Verify and parse a webhook request. 401 for a missing or wrong signature, 400 for a malformed one. */
export async function receiveWebhook(request: Request): Promise<ReceivedWebhook> {
  const secret = getEnv().GITHUB_APP_WEBHOOK_SECRET;
  if (!secret) throw new AppError("unavailable:github", "GitHub webhooks are not configured on this server (GITHUB_APP_WEBHOOK_SECRET).");
  const raw = await readRawBody(request);
  if (!verifySignature({ secret, payload: raw, signature: request.headers.get("x-hub-signature-256") })) {
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
  return { deliveryId, event, action, payload: payload as Record<string, unknown> };
}

/** Store a delivery; false when its id was seen before (nothing is changed then). */
export async function recordDelivery(delivery: ReceivedWebhook): Promise<boolean> {
  const db = await getDb();
  const inserted = await db
    .insert(githubDeliveries)
    .values({ id: delivery.deliveryId, event: delivery.event, action: delivery.action, payload: delivery.payload })
    .onConflictDoNothing()
    .returning({ id: githubDeliveries.id });
  return inserted.length === 1;
}

/** Undo recordDelivery when the work could not be queued, so GitHub's redelivery is not taken for a replay. */
export async function forgetDelivery(deliveryId: string) {
  const db = await getDb();
  await db.delete(githubDeliveries).where(eq(githubDeliveries.id, deliveryId));
}
