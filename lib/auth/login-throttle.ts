import { getEnv } from "@/lib/env";
import { log } from "@/lib/log";

/**
 * Brute-force protection for the local owner's sign-in (password or one-time link), after OWASP: lock the attacker,
 * not the account, so a stranger cannot keep the owner out.
 *
 * - Per client: an address gets 5 free failures, then each further one blocks that address for a growing delay (1 s,
 *   2 s, 4 s … up to 15 min) — even for the right password.
 * - A browser that has signed in before carries a signed device cookie (device-cookie.ts): it is throttled on its own
 *   (same 5 free, same delays) and never by what other clients did.
 * - Per account: failures from clients without a device cookie are counted, but block them only once they come from
 *   several addresses (a spread-out attack, or addresses a client made up: without a trusted proxy the address is a
 *   claim). Then, past 10 failures, each further one blocks those clients for a growing delay. One address guessing
 *   alone never reaches this, so the owner elsewhere still gets in.
 * A success clears the client's (or device's) own record. In-process, like the API rate limits: one machine.
 */
const FREE_PER_CLIENT = 5;
const FREE_PER_ACCOUNT = 10;
/** Failing addresses after which the account-wide limit applies to clients without a device cookie. */
const SPREAD_CLIENTS = 3;
const MAX_DELAY_MS = 15 * 60_000;
/** A key with no failure for this long starts again from zero. */
const FORGET_AFTER_MS = 60 * 60_000;
const MAX_ENTRIES = 10_000;

type Entry = { failures: number; lastFailureAt: number; blockedUntil: number; clients?: Set<string> };

export type LoginKeys = {
  account: string;
  /** The client's address (clientAddress). */
  client: string;
  /** A valid device cookie's id for this account (deviceFrom), when the browser sent one. */
  device?: string | null;
};

export type LoginThrottle = {
  /** Seconds the caller must wait before another attempt (0 when allowed). */
  retryAfter(keys: LoginKeys): number;
  failed(keys: LoginKeys): void;
  succeeded(keys: LoginKeys): void;
  reset(): void;
};

const delayAfter = (excess: number) => Math.min(MAX_DELAY_MS, 1000 * 2 ** (excess - 1));

export function createLoginThrottle({ now = () => Date.now() }: { now?: () => number } = {}): LoginThrottle {
  const entries = new Map<string, Entry>();
  /** The client's own key: its device when it has one, else its address. */
  const ownKey = ({ client, device }: LoginKeys) => (device ? `device:${device}` : `client:${client}`);
  const accountKey = ({ account }: LoginKeys) => `account:${account}`;
  const current = (key: string, t: number) => {
    const entry = entries.get(key);
    if (entry && t - entry.lastFailureAt > FORGET_AFTER_MS) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  };
  const bump = (key: string, t: number) => {
    const entry = current(key, t) ?? { failures: 0, lastFailureAt: t, blockedUntil: 0 };
    entry.failures += 1;
    entry.lastFailureAt = t;
    entries.set(key, entry);
    return entry;
  };
  return {
    retryAfter(keys) {
      const t = now();
      const blocking = keys.device ? [ownKey(keys)] : [ownKey(keys), accountKey(keys)];
      let wait = 0;
      for (const key of blocking) wait = Math.max(wait, (current(key, t)?.blockedUntil ?? 0) - t);
      return wait > 0 ? Math.ceil(wait / 1000) : 0;
    },
    failed(keys) {
      const t = now();
      if (entries.size >= MAX_ENTRIES) for (const [key, e] of entries) if (t - e.lastFailureAt > FORGET_AFTER_MS) entries.delete(key);
      const own = bump(ownKey(keys), t);
      if (own.failures > FREE_PER_CLIENT) own.blockedUntil = t + delayAfter(own.failures - FREE_PER_CLIENT);
      if (keys.device) return;
      const account = bump(accountKey(keys), t);
      account.clients ??= new Set();
      if (account.clients.size < 100) account.clients.add(keys.client);
      if (account.clients.size >= SPREAD_CLIENTS && account.failures > FREE_PER_ACCOUNT) {
        account.blockedUntil = t + delayAfter(account.failures - FREE_PER_ACCOUNT);
      }
    },
    succeeded(keys) {
      // Only the client's own record: the owner signing in must not hand an ongoing attack a fresh allowance.
      entries.delete(ownKey(keys));
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
 * The client's address as far as we can tell. Behind a trusted proxy (GATEHOUSE_TRUST_PROXY), the address that proxy
 * appended: the last entry of X-Forwarded-For. Otherwise what Next put there from the socket — which a client may
 * have pre-filled (Next keeps a client's header), so it is a claim: the account-wide limit above is what bounds a
 * client that makes addresses up.
 */
export function clientAddress(headers: { get(name: string): string | null }): string {
  const forwarded = headers.get("x-forwarded-for") ?? "";
  const parts = forwarded.split(",").map((p) => p.trim()).filter(Boolean);
  const trusted = getEnv().GATEHOUSE_TRUST_PROXY;
  const address = trusted ? parts.at(-1) || headers.get("x-real-ip")?.trim() : forwarded.trim();
  return (address || "unknown").slice(0, 100);
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
  log.warn("local sign-in failed", {
    account: keys.account,
    client: keys.client,
    ...(keys.device ? { knownDevice: true } : {}),
    ...(retryAfter ? { blockedForSeconds: retryAfter } : {}),
  });
}
