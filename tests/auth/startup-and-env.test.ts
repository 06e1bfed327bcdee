import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Auth } from "@auth/core";
import { EnvError, parseEnv, resetEnvCache } from "@/lib/env";
import { getAuthConfig } from "@/lib/auth/config";
import { consumeLoginToken } from "@/lib/auth/login-link";
import { signInMethods } from "@/lib/auth/providers";
import { findCommittedSecrets, printStartupBanner, resetStartupBanner, startupWarnings } from "@/lib/auth/startup";
import { createRateLimiter } from "@/lib/security/rate-limit";
import { FAKE } from "../security/fake-secrets";

describe("startup banner", () => {
  it("prints a one-time sign-in link in local mode that signs in exactly once", async () => {
    resetStartupBanner();
    const printed: string[] = [];
    await printStartupBanner({ print: (l) => printed.push(l), warn: () => {} });
    const link = printed.map((l) => /(http\S+\/signin\?token=(\S+))/.exec(l)).find(Boolean);
    expect(link, printed.join("\n")).toBeTruthy();
    const token = decodeURIComponent(link![2]!);
    expect(await consumeLoginToken(token)).toBe(true);
    expect(await consumeLoginToken(token)).toBe(false);
  });

  it("prints security warnings first and the sign-in link last, so the link is what a newcomer sees", async () => {
    resetStartupBanner();
    process.env.HOST = "0.0.0.0";
    resetEnvCache();
    try {
      const all: string[] = [];
      await printStartupBanner({ print: (l) => all.push(l), warn: (l) => all.push(l) });
      expect(all.some((l) => l.startsWith("[security]") && /HOST=0\.0\.0\.0/.test(l))).toBe(true);
      expect(all.at(-1)).toMatch(/^\s+http\S+\/signin\?token=\S+$/);
      expect(all.findLastIndex((l) => l.startsWith("[security]"))).toBeLessThan(all.findIndex((l) => l.startsWith("Gatehouse on ")));
    } finally {
      delete process.env.HOST;
      resetEnvCache();
    }
  });

  it("prints only once per process", async () => {
    resetStartupBanner();
    const printed: string[] = [];
    await printStartupBanner({ print: (l) => printed.push(l), warn: () => {} });
    const count = printed.length;
    await printStartupBanner({ print: (l) => printed.push(l), warn: () => {} });
    expect(printed.length).toBe(count);
  });

  it("warns when HOST exposes the server beyond loopback, and not by default", () => {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-nogit-"));
    expect(startupWarnings(parseEnv({}), { cwd }).join("\n")).not.toMatch(/HOST/);
    expect(startupWarnings(parseEnv({ HOST: "0.0.0.0" }), { cwd }).join("\n")).toMatch(/HOST=0\.0\.0\.0.*reachable from other machines/);
  });
});

describe("committed-secret scan", () => {
  function repoWith(files: Record<string, string>) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-scan-"));
    execFileSync("git", ["init", "-q"], { cwd: dir });
    for (const [name, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), content);
    }
    execFileSync("git", ["add", "-f", "."], { cwd: dir });
    return dir;
  }

  it("flags tracked .env files, the data directory, configured secret values and credential shapes", () => {
    const dir = repoWith({
      ".env": "X=1\n",
      ".env.example": "# fine\n",
      "config/.env.production": "Y=2\n",
      "data/gatehouse.db": "sqlite",
      "src/keys.ts": `export const k = "${FAKE.anthropic}";\n`,
      "deploy/id_rsa": FAKE.privateKey,
      "notes.md": "the webhook secret is my-configured-webhook-secret\n",
      "README.md": "nothing to see\n",
    });
    const findings = findCommittedSecrets({ cwd: dir, secrets: ["my-configured-webhook-secret"] });
    const files = findings.map((f) => f.file);
    expect(files).toEqual(expect.arrayContaining([".env", "config/.env.production", "data/gatehouse.db", "src/keys.ts", "deploy/id_rsa", "notes.md"]));
    expect(files).not.toContain(".env.example");
    expect(files).not.toContain("README.md");
    expect(findings.find((f) => f.file === "notes.md")?.what).toBe("a secret configured in env");
  });

  it("passes over test fixtures (tests/, e2e/, *.test.*, *.spec.*) but not the same key elsewhere", () => {
    const dir = repoWith({
      "tests/db/run-events.test.ts": FAKE.privateKey,
      "e2e/oidc-constants.ts": "export const OIDC_CLIENT_SECRET = 'my-configured-webhook-secret';\n",
      "lib/redact.test.ts": `const k = "${FAKE.anthropic}";\n`,
      "app/page.spec.tsx": `const k = "${FAKE.anthropic}";\n`,
      "lib/keys.ts": `export const k = "${FAKE.anthropic}";\n`,
      "tests/.env": "X=1\n",
    });
    const files = new Set(findCommittedSecrets({ cwd: dir, secrets: ["my-configured-webhook-secret"] }).map((f) => f.file));
    expect([...files]).toEqual(["lib/keys.ts"]);
  });

  it("the app's own checkout scans clean: no false alarm at start from its fixtures", () => {
    const root = path.resolve(import.meta.dirname, "../..");
    expect(findCommittedSecrets({ cwd: root, secrets: ["e2e-oidc-client-secret-not-a-real-one", "e2e-admin-token-0123456789abcdef"] })).toEqual([]);
  });

  it("finds nothing in a clean repository, and nothing outside git", () => {
    expect(findCommittedSecrets({ cwd: repoWith({ "README.md": "hi\n", ".env.example": "A=\n" }) })).toEqual([]);
    expect(findCommittedSecrets({ cwd: fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-nogit-")) })).toEqual([]);
  });

  it("this repository's .gitignore keeps .env files and the data directory out of git", () => {
    const root = path.resolve(import.meta.dirname, "../..");
    const ignored = (p: string) => {
      try {
        execFileSync("git", ["check-ignore", "-q", "--no-index", p], { cwd: root });
        return true;
      } catch {
        return false;
      }
    };
    for (const p of [".env", ".env.local", ".env.production", ".env.development.local", "data/gatehouse.db", "data/auth-secret"]) {
      expect(ignored(p), p).toBe(true);
    }
    expect(ignored(".env.example")).toBe(false);
  });
});

describe("sign-in configuration from env", () => {
  it("names the missing half of a provider's settings", () => {
    expect(() => parseEnv({ AUTH_GITHUB_ID: "abc" })).toThrow(/AUTH_GITHUB_SECRET must be set together with AUTH_GITHUB_ID/);
    expect(() => parseEnv({ AUTH_OIDC_ISSUER: "https://id.example.com" })).toThrow(EnvError);
    expect(() => parseEnv({ AUTH_OIDC_ISSUER: "https://id.example.com", AUTH_OIDC_CLIENT_ID: "x" })).toThrow(
      /AUTH_OIDC_CLIENT_SECRET must be set together with AUTH_OIDC_ISSUER and AUTH_OIDC_CLIENT_ID/,
    );
    expect(() => parseEnv({ AUTH_OIDC_ISSUER: "id.example.com", AUTH_OIDC_CLIENT_ID: "x", AUTH_OIDC_CLIENT_SECRET: "y" })).toThrow(
      /AUTH_OIDC_ISSUER must be an http\(s\) URL/,
    );
    expect(() => parseEnv({ GATEHOUSE_RATE_LIMIT_RUNS: "0" })).toThrow(/GATEHOUSE_RATE_LIMIT_RUNS must be at least 1/);
  });

  it("offers the providers that are configured, and the local owner always", () => {
    expect(signInMethods(parseEnv({})).map((m) => m.id)).toEqual(["local"]);
    const env = parseEnv({
      AUTH_GITHUB_ID: "gh-id",
      AUTH_GITHUB_SECRET: "gh-secret",
      AUTH_OIDC_ISSUER: "https://id.example.com",
      AUTH_OIDC_CLIENT_ID: "client",
      AUTH_OIDC_CLIENT_SECRET: "secret",
      AUTH_OIDC_NAME: "Acme SSO",
    });
    expect(signInMethods(env)).toEqual([
      { id: "github", name: "GitHub", type: "oauth" },
      { id: "oidc", name: "Acme SSO", type: "oidc" },
      { id: "local", name: "Owner", type: "local" },
    ]);
  });

  it("Auth.js lists exactly the local provider when nothing else is configured", async () => {
    const res = await Auth(new Request("http://127.0.0.1:3000/api/auth/providers"), getAuthConfig());
    expect(Object.keys((await res.json()) as object)).toEqual(["local"]);
  });
});

describe("token bucket", () => {
  it("allows a burst up to capacity, then refuses with the seconds until the next token, and refills over time", () => {
    let now = 0;
    const limiter = createRateLimiter({ now: () => now });
    const limit = { capacity: 3, refillPerMs: 3 / 60_000 };
    expect([0, 0, 0].map(() => limiter.take("u1", limit))).toEqual([0, 0, 0]);
    expect(limiter.take("u1", limit)).toBe(20);
    expect(limiter.take("u2", limit)).toBe(0);
    now += 20_000;
    expect(limiter.take("u1", limit)).toBe(0);
    expect(limiter.take("u1", limit)).toBe(20);
  });
});
