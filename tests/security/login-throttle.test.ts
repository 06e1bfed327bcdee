import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as authRoute from "@/app/api/auth/[...nextauth]/route";
import { createLoginToken, consumeLoginToken } from "@/lib/auth/login-link";
import { createLoginThrottle, loginThrottle, type LoginThrottle } from "@/lib/auth/login-throttle";
import { resetEnvCache } from "@/lib/env";
import { ORIGIN } from "../auth/fixtures";

/* Finding 1: 60 wrong owner passwords in 3.6 s got no 429 and no lockout; the right one then signed in. */

const PASSWORD = "correct horse battery staple";

beforeAll(() => {
  process.env.GATEHOUSE_ADMIN_PASSWORD = PASSWORD;
  resetEnvCache();
});

beforeEach(() => {
  // Auth.js logs every refused credential on stderr; the throttle's own log lines are asserted on below.
  vi.spyOn(console, "error").mockImplementation(() => {});
});

afterEach(() => {
  vi.useRealTimers();
  loginThrottle().reset();
  vi.restoreAllMocks();
});

/** A browser's sign-in: fetch the CSRF token (and its cookie), then POST the form to the local callback. */
async function signIn(fields: Record<string, string>, client = "203.0.113.7", extraCookie = "") {
  const csrf = await authRoute.GET(new Request(`${ORIGIN}/api/auth/csrf`, { headers: { "x-forwarded-for": client } }));
  const { csrfToken } = (await csrf.json()) as { csrfToken: string };
  const cookie = [...csrf.headers.getSetCookie().map((c) => c.split(";")[0]), ...(extraCookie ? [extraCookie] : [])].join("; ");
  const body = new URLSearchParams({ csrfToken, callbackUrl: `${ORIGIN}/`, ...fields });
  return authRoute.POST(
    new Request(`${ORIGIN}/api/auth/callback/local`, {
      method: "POST",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": client, origin: ORIGIN },
      body,
    }),
  );
}

const signedIn = (res: Response) => res.headers.getSetCookie().some((c) => /authjs\.session-token=[^;]+/.test(c));
/** The device cookie a successful sign-in handed the browser, as a Cookie header entry. */
const deviceCookie = (res: Response) => res.headers.getSetCookie().find((c) => c.startsWith("gatehouse-device="))?.split(";")[0] ?? "";

describe("finding 1: owner password brute force", () => {
  it("the right password signs in (baseline)", async () => {
    const res = await signIn({ password: PASSWORD });
    expect(signedIn(res)).toBe(true);
  });

  it("repeated wrong passwords from one address get 429 with Retry-After and a log line, and then even the right password waits", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) statuses.push((await signIn({ password: `wrong-${i}` })).status);
    expect(statuses.slice(0, 5).every((s) => s !== 429)).toBe(true);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(50);
    const blocked = await signIn({ password: PASSWORD });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await blocked.json()) as { error: { code: string } }).error.code).toBe("rate_limited:auth");
    expect(signedIn(blocked)).toBe(false);
    const page = await authRoute.POST(
      new Request(`${ORIGIN}/api/auth/callback/local`, { method: "POST", headers: { accept: "text/html", "x-forwarded-for": "203.0.113.7" } }),
    );
    expect(page.status).toBe(429);
    expect(await page.text()).toMatch(/Too many failed sign-in attempts/);
    const lines = warn.mock.calls.map((c) => String(c[0]));
    expect(lines.some((l) => l.includes("local sign-in failed") && l.includes("203.0.113.7"))).toBe(true);
    expect(lines.some((l) => l.includes("too many failed attempts"))).toBe(true);
    expect(lines.join("\n")).not.toContain("wrong-");
  });

  it("rotating client addresses does not escape the per-account limit", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) statuses.push((await signIn({ password: `wrong-${i}` }, `198.51.100.${i}`)).status);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(10);
    expect((await signIn({ password: PASSWORD }, "198.51.100.200")).status).toBe(429);
  });

  it("guessed one-time tokens count as failures too", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    let last = 0;
    for (let i = 0; i < 8; i++) last = (await signIn({ token: `guess-${i}` })).status;
    expect(last).toBe(429);
  });

  it("the delay grows with each further failure, is capped, and a success clears it", () => {
    let t = 0;
    const throttle = createLoginThrottle({ now: () => t });
    const keys = { account: "a", client: "c" };
    const waits: number[] = [];
    for (let i = 0; i < 20; i++) {
      throttle.failed(keys);
      waits.push(throttle.retryAfter(keys));
      t += waits.at(-1)! * 1000;
    }
    expect(waits.slice(0, 4)).toEqual([0, 0, 0, 0]);
    expect(waits.slice(5, 9)).toEqual([1, 2, 4, 8]);
    expect(Math.max(...waits)).toBe(900);
    throttle.succeeded(keys);
    expect(throttle.retryAfter(keys)).toBe(0);
  });

  it("the one-time sign-in link works once and not after it expires", async () => {
    const token = await createLoginToken();
    expect(signedIn(await signIn({ token }))).toBe(true);
    expect(signedIn(await signIn({ token }))).toBe(false);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const stale = await createLoginToken();
      vi.setSystemTime(Date.now() + 25 * 60 * 60 * 1000);
      expect(await consumeLoginToken(stale)).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("finding 12: a stranger cannot keep the owner from signing in", () => {
  it("after many wrong passwords from attacker address A, the owner from address B signs in, and A keeps getting 429", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const attacker = "192.0.2.66";
    // A patient attacker: waits out every block (the throttle's clock is moved on) and guesses again — 20 wrong
    // passwords checked.
    let clock = Date.now();
    (globalThis as { __gatehouseLoginThrottle?: LoginThrottle }).__gatehouseLoginThrottle = createLoginThrottle({ now: () => clock });
    let checked = 0;
    for (let i = 0; checked < 20 && i < 100; i++) {
      const res = await signIn({ password: `wrong-${checked}` }, attacker);
      if (res.status === 429) clock += Number(res.headers.get("retry-after")) * 1000;
      else checked++;
    }
    expect(checked).toBe(20);
    const owner = await signIn({ password: PASSWORD }, "203.0.113.50");
    expect(owner.status).not.toBe(429);
    expect(signedIn(owner)).toBe(true);
    // The attacker's address stays locked, for a wrong and for the right password alike.
    expect((await signIn({ password: "wrong-again" }, attacker)).status).toBe(429);
    const right = await signIn({ password: PASSWORD }, attacker);
    expect(right.status).toBe(429);
    expect(signedIn(right)).toBe(false);
  });

  it("a browser that signed in before gets in during a spread-out attack that blocks unknown clients; a forged device cookie does not", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const first = await signIn({ password: PASSWORD }, "203.0.113.80");
    const device = deviceCookie(first);
    expect(device).toMatch(/^gatehouse-device=[\w-]+\.[\w-]+$/);
    for (let i = 0; i < 30; i++) await signIn({ password: `wrong-${i}` }, `198.51.100.${i}`);
    expect((await signIn({ password: PASSWORD }, "203.0.113.81")).status).toBe(429);
    const forged = `${device.slice(0, -4)}AAAA`;
    expect((await signIn({ password: PASSWORD }, "203.0.113.81", forged)).status).toBe(429);
    const known = await signIn({ password: PASSWORD }, "203.0.113.81", device);
    expect(signedIn(known)).toBe(true);
    // The known browser's own guesses are throttled on their own: 5 free, then it waits too.
    const own: number[] = [];
    for (let i = 0; i < 7; i++) own.push((await signIn({ password: `typo-${i}` }, "203.0.113.81", device)).status);
    expect(own.slice(0, 5).every((s) => s !== 429)).toBe(true);
    expect(own.at(-1)).toBe(429);
  });
});
