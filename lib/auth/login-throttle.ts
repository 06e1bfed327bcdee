import { getEnv } from "@/lib/env";
import { log } from "@/lib/log";

/**
 * Brute-force protection for the local owner's sign-in (password or one-time link). Failures are counted per account
 * and per client address; past a few free attempts each further failure blocks that key for a growing delay
 * (1 s, 2 s, 4 s … up to 15 min). A success clears both. In-process, like the API rate limits: one machine.
 */
const FREE_PER_CLIENT = 5;
const FREE_PER_ACCOUNT = 10;
const MAX_DELAY_MS = 15 * 60_000;
/** A key with no failure for this long starts again from zero. */
const FORGET_AFTER_MS = 60 * 60_000;

type Entry = { failures: number; lastFailureAt: number; blockedUntil: number };

export type LoginThrottle = {
  /** Seconds the caller must wait before another attempt (0 when allowed). */
  retryAfter(keys: LoginKeys): number;
  failed(keys: LoginKeys): void;
  succeeded(keys: LoginKeys): void;
  reset(): void;
};

export type LoginKeys = { account: string; client: string };

export function createLoginThrottle({ now = Date.now }: { now?: () => number } = {}): LoginThrottle {
  const entries = new Map<string, Entry>();
  const keysOf = ({ account, client }: LoginKeys) =>
    [
      [`account:${account}`, FREE_PER_ACCOUNT],
      [`client:${client}`, FREE_PER_CLIENT],
    ] as const;
  const current = (key: string, t: number) => {
    const entry = entries.get(key);
    if (entry && t - entry.lastFailureAt > FORGET_AFTER_MS) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  };
  return {
    retryAfter(keys) {
      const t = now();
      let wait = 0;
      for (const [key] of keysOf(keys)) wait = Math.max(wait, (current(key, t)?.blockedUntil ?? 0) - t);
      return wait > 0 ? Math.ceil(wait / 1000) : 0;
    },
    failed(keys) {
      const t = now();
      if (entries.size >= 10_000) for (const [key, e] of entries) if (t - e.lastFailureAt > FORGET_AFTER_MS) entries.delete(key);
      for (const [key, free] of keysOf(keys)) {
        const entry = current(key, t) ?? { failures: 0, lastFailureAt: t, blockedUntil: 0 };
        entry.failures += 1;
        entry.lastFailureAt = t;
        const excess = entry.failures - free;
        if (excess > 0) entry.blockedUntil = t + Math.min(MAX_DELAY_MS, 1000 * 2 ** (excess - 1));
        entries.set(key, entry);
      }
    },
    succeeded(keys) {
      for (const [key] of keysOf(keys)) entries.delete(key);
    },
    reset() {
      entries.clear();
    },
  };
}

const globalForThrottle = globalThis as unknown as { __gatehouseLoginThrottle?: LoginThrottle };

export function loginThrottle(): LoginThrottle {
  globalForThrottle.__gatehouseLoginThrottle ??= createLoginThrottle();
  return globalForThrottle.__gatehouseLoginThrottle;
}

/**
 * The client's address as far as we can tell. Behind a trusted proxy, the address that proxy appended (last entry of
 * X-Forwarded-For); otherwise what Next put there from the socket — which a client may have pre-filled, so the
 * per-account limit is what really bounds guessing.
 */
export function clientAddress(headers: { get(name: string): string | null }): string {
  const forwarded = headers.get("x-forwarded-for") ?? "";
  const parts = forwarded.split(",").map((p) => p.trim()).filter(Boolean);
  const address = getEnv().GATEHOUSE_TRUST_PROXY ? parts.at(-1) : forwarded.trim();
  return (address || headers.get("x-real-ip") || "unknown").slice(0, 100);
}

/** Record the outcome of one local sign-in attempt (with a log line for every failure and every block). */
export function recordLoginAttempt({ keys, ok }: { keys: LoginKeys; ok: boolean }): void {
  const throttle = loginThrottle();
  if (ok) {
    throttle.succeeded(keys);
    return;
  }
  throttle.failed(keys);
  const retryAfter = throttle.retryAfter(keys);
  log.warn("local sign-in failed", { account: keys.account, client: keys.client, ...(retryAfter ? { blockedForSeconds: retryAfter } : {}) });
}
