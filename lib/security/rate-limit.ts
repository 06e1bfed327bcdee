import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";

/**
 * Per-user rate limits: an in-process token bucket per (bucket, user). Good for one machine; a scaled-out deployment
 * would put the buckets in a shared store behind the same call.
 */
export type RateLimitBucket = "runs" | "decisions" | "tokens" | "projects" | "notification-tests";

type Bucket = { tokens: number; updatedAt: number };
type Limit = { capacity: number; refillPerMs: number };

export type RateLimiter = {
  /** Take one token; returns 0 when allowed, else the seconds until one is available. */
  take(key: string, limit: Limit): number;
  reset(): void;
};

/** A limiter with its own clock (tests pass a fake one). */
export function createRateLimiter({ now = Date.now }: { now?: () => number } = {}): RateLimiter {
  const buckets = new Map<string, Bucket>();
  return {
    take(key, { capacity, refillPerMs }) {
      const t = now();
      let bucket = buckets.get(key);
      if (!bucket) {
        // Bound memory: a full bucket carries no information, so idle users are forgotten when the map grows.
        if (buckets.size >= 10_000) sweep(buckets, t, refillPerMs, capacity);
        bucket = { tokens: capacity, updatedAt: t };
      }
      bucket.tokens = Math.min(capacity, bucket.tokens + (t - bucket.updatedAt) * refillPerMs);
      bucket.updatedAt = t;
      buckets.set(key, bucket);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return 0;
      }
      return Math.max(1, Math.ceil((1 - bucket.tokens) / refillPerMs / 1000));
    },
    reset() {
      buckets.clear();
    },
  };
}

function sweep(buckets: Map<string, Bucket>, t: number, refillPerMs: number, capacity: number) {
  for (const [key, b] of buckets) if (b.tokens + (t - b.updatedAt) * refillPerMs >= capacity) buckets.delete(key);
}

const globalForLimiter = globalThis as unknown as { __gatehouseRateLimiter?: RateLimiter };

function limiter(): RateLimiter {
  globalForLimiter.__gatehouseRateLimiter ??= createRateLimiter();
  return globalForLimiter.__gatehouseRateLimiter;
}

export function limitFor(bucket: RateLimitBucket): Limit {
  const env = getEnv();
  const perMinute =
    bucket === "runs" ? env.GATEHOUSE_RATE_LIMIT_RUNS : bucket === "decisions" ? env.GATEHOUSE_RATE_LIMIT_DECISIONS : env.GATEHOUSE_RATE_LIMIT_CREATIONS;
  return { capacity: perMinute, refillPerMs: perMinute / 60_000 };
}

/**
 * Spend one request of the user's budget for `bucket`, or throw AppError rate_limited:api (→ 429 with Retry-After).
 * Call it in a route after authentication and before the action, e.g. `rateLimit({ user, bucket: "decisions" })`.
 */
export async function rateLimit({ user, bucket }: { user: { id: string }; bucket: RateLimitBucket }): Promise<void> {
  const retryAfter = limiter().take(`${bucket}:${user.id}`, limitFor(bucket));
  if (retryAfter > 0) {
    throw new AppError("rate_limited:api", `Too many ${WHAT[bucket]}; try again in ${retryAfter} s.`, {
      headers: { "retry-after": String(retryAfter) },
      details: { retryAfterSeconds: retryAfter },
    });
  }
}

const WHAT: Record<RateLimitBucket, string> = { runs: "new runs", decisions: "decisions", tokens: "new API tokens", projects: "new projects", "notification-tests": "test notifications" };

/** Forget all buckets (tests). */
export function resetRateLimits(): void {
  limiter().reset();
}
