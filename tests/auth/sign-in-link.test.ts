import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import * as authRoute from "@/app/api/auth/[...nextauth]/route";
import { SignInForm } from "@/components/auth/sign-in-form";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { verificationTokens } from "@/lib/db/schema";
import { createLoginToken } from "@/lib/auth/login-link";
import { loadEnvFiles, resetEnvCache } from "@/lib/env";
import { loginThrottle } from "@/lib/auth/login-throttle";
import { SIGN_IN_LINK_COMMAND } from "@/lib/auth/sign-in-help";
import { ORIGIN } from "./fixtures";

/* Issue #32, finding 1: after signing out, the owner had no way back in without restarting the server. */

const ROOT = path.resolve(import.meta.dirname, "../..");

beforeEach(() => {
  // Auth.js logs every refused credential on stderr.
  vi.spyOn(console, "error").mockImplementation(() => {});
  vi.spyOn(console, "warn").mockImplementation(() => {});
});

afterEach(() => {
  loginThrottle().reset();
  vi.restoreAllMocks();
});

/** A browser's sign-in with a one-time token: CSRF token and cookie, then the form POST to the local callback. */
async function signInWithToken(token: string) {
  const csrf = await authRoute.GET(new Request(`${ORIGIN}/api/auth/csrf`));
  const { csrfToken } = (await csrf.json()) as { csrfToken: string };
  const cookie = csrf.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
  return authRoute.POST(
    new Request(`${ORIGIN}/api/auth/callback/local`, {
      method: "POST",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin: ORIGIN },
      body: new URLSearchParams({ csrfToken, callbackUrl: `${ORIGIN}/`, token }),
    }),
  );
}

const signedIn = (res: Response) => res.headers.getSetCookie().some((c) => /authjs\.session-token=[^;]+/.test(c));

describe("npm run sign-in-link", () => {
  it("is the package script the sign-in page names", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(SIGN_IN_LINK_COMMAND).toBe("npm run sign-in-link");
    expect(pkg.scripts["sign-in-link"]).toBe("tsx scripts/sign-in-link.ts");
  });

  it("run as its own process on the server's database, prints a link the running server accepts once, then refuses", async () => {
    await getDb(); // migrated here first, as the running server's database would be
    const { stdout } = await promisify(execFile)(path.join(ROOT, "node_modules/.bin/tsx"), ["scripts/sign-in-link.ts"], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        TMPDIR: os.tmpdir(),
        NODE_ENV: "test",
        GATEHOUSE_DATA_DIR: process.env.GATEHOUSE_DATA_DIR,
        DATABASE_URL: process.env.DATABASE_URL,
      },
      timeout: 120_000,
    });
    const match = /(http:\/\/\S+\/signin\?token=(\S+))/.exec(stdout);
    expect(match, stdout).toBeTruthy();
    expect(stdout).toMatch(/works once/);
    const token = decodeURIComponent(match![2]!);

    const first = await signInWithToken(token);
    expect(signedIn(first)).toBe(true);
    const again = await signInWithToken(token);
    expect(signedIn(again)).toBe(false);
    expect(again.headers.get("location")).toMatch(/\/signin\?error=CredentialsSignin/);
  });
});

describe("minting links again and again", () => {
  it("leaves no expired link rows behind: each new link removes the owner's expired ones", async () => {
    const rows = async () => (await (await getDb()).select().from(verificationTokens).where(eq(verificationTokens.identifier, "local-owner-login"))).length;
    await createLoginToken();
    await createLoginToken();
    const before = await rows();
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 25 * 60 * 60 * 1000);
      await createLoginToken();
      expect(before).toBeGreaterThanOrEqual(2);
      expect(await rows()).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("the sign-in page names the way back in", () => {
  const render = (props: { error?: string; hasPassword: boolean }) =>
    renderToStaticMarkup(createElement(SignInForm, { callbackUrl: "/", providers: [], ...props }));

  it("without an owner password: names the command, and asks for no password", () => {
    const html = render({ hasPassword: false });
    expect(html).toContain("No owner password is set on this server. To sign in, run `npm run sign-in-link`");
    expect(html).not.toMatch(/type="password"/);
  });

  it("a used or expired link says what to do instead of “Try again.”", () => {
    const html = render({ error: "CredentialsSignin", hasPassword: false });
    expect(html).toMatch(/already used or has expired[^<]*npm run sign-in-link/);
    expect(html).not.toContain("Try again");
  });

  it("with an owner password: the password field, and the command for a link", () => {
    const html = render({ hasPassword: true });
    expect(html).toMatch(/type="password"/);
    expect(html).toContain("npm run sign-in-link");
  });
});

describe("loadEnvFiles", () => {
  it("loads Next's env files in its order, a variable already set winning over every file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-envfiles-"));
    fs.writeFileSync(path.join(dir, ".env"), "GH_T_A=env\nGH_T_B=env\nGH_T_C=env\n");
    fs.writeFileSync(path.join(dir, ".env.test"), "GH_T_B=env.test\n");
    process.env.GH_T_C = "set";
    try {
      expect(loadEnvFiles({ dir })).toEqual([".env.test", ".env"]);
      expect([process.env.GH_T_A, process.env.GH_T_B, process.env.GH_T_C]).toEqual(["env", "env.test", "set"]);
    } finally {
      for (const name of ["GH_T_A", "GH_T_B", "GH_T_C"]) delete process.env[name];
      resetEnvCache();
    }
  });
});
