import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import * as authRoute from "@/app/api/auth/[...nextauth]/route";
import * as projectsRoute from "@/app/api/projects/route";
import * as tokensRoute from "@/app/api/tokens/route";
import { loginThrottle } from "@/lib/auth/login-throttle";
import { resetEnvCache } from "@/lib/env";
import { resetRateLimits } from "@/lib/security/rate-limit";
import { call, ORIGIN } from "../auth/fixtures";

/* Finding 10 (#29): after POST /api/auth/signout the old cookie still read /api/projects and minted an API token. */

const PASSWORD = "correct horse battery staple";

beforeAll(() => {
  process.env.GATEHOUSE_ADMIN_PASSWORD = PASSWORD;
  resetEnvCache();
});

afterEach(() => {
  loginThrottle().reset();
  resetRateLimits();
  vi.restoreAllMocks();
});

const cookiesOf = (res: Response) => res.headers.getSetCookie().map((c) => c.split(";")[0]!);

/** The CSRF token and its cookie, as a browser fetches them before any Auth.js POST. */
async function csrf(cookie = "") {
  const res = await authRoute.GET(new Request(`${ORIGIN}/api/auth/csrf`, { headers: cookie ? { cookie } : {} }));
  const { csrfToken } = (await res.json()) as { csrfToken: string };
  return { csrfToken, cookie: [cookie, ...cookiesOf(res)].filter(Boolean).join("; ") };
}

/** Sign in with the owner's password; the session cookie the browser would keep. */
async function signIn(): Promise<string> {
  const { csrfToken, cookie } = await csrf();
  const res = await authRoute.POST(
    new Request(`${ORIGIN}/api/auth/callback/local`, {
      method: "POST",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, "x-forwarded-for": "203.0.113.9" },
      body: new URLSearchParams({ csrfToken, callbackUrl: `${ORIGIN}/`, password: PASSWORD }),
    }),
  );
  const session = cookiesOf(res).find((c) => /^authjs\.session-token=.+/.test(c));
  expect(session, "the sign-in sets a session cookie").toBeTruthy();
  return session!;
}

/** The sign-out button's request: POST /api/auth/signout with the CSRF token and the session cookie. */
async function signOut(session: string) {
  const { csrfToken, cookie } = await csrf(session);
  const res = await authRoute.POST(
    new Request(`${ORIGIN}/api/auth/signout`, {
      method: "POST",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, "x-auth-return-redirect": "1" },
      body: new URLSearchParams({ csrfToken, callbackUrl: "/signin" }),
    }),
  );
  expect(res.status).toBeLessThan(400);
}

const readProjects = (cookie: string) => call(projectsRoute.GET, { path: "/api/projects", headers: { cookie } });
const mintToken = (cookie: string) =>
  call(tokensRoute.POST, { method: "POST", path: "/api/tokens", headers: { cookie, origin: ORIGIN }, body: { name: "after sign-out" } });

describe("finding 10: signing out ends the session on the server", () => {
  it("the old cookie, copied before sign-out, gets 401 on /api/projects and on POST /api/tokens afterwards", async () => {
    const session = await signIn();
    // Baseline: the cookie works until sign-out.
    expect((await readProjects(session)).status).toBe(200);
    expect((await mintToken(session)).status).toBe(201);

    await signOut(session);

    const projects = await readProjects(session);
    expect(projects.status).toBe(401);
    expect(projects.json.error.code).toBe("unauthorized:auth");
    const token = await mintToken(session);
    expect(token.status).toBe(401);
    expect(token.json.token).toBeUndefined();
  });

  it("signing out one session leaves another session of the same owner signed in", async () => {
    const laptop = await signIn();
    const phone = await signIn();
    await signOut(laptop);
    expect((await readProjects(laptop)).status).toBe(401);
    expect((await readProjects(phone)).status).toBe(200);
  });
});
