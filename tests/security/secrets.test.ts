import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { baseChildEnv, resetEnvCache, SECRET_ENV_NAMES } from "@/lib/env";
import { log } from "@/lib/log";
import { redact, redactDeep } from "@/lib/redact";
import { LocalSandbox } from "@/lib/sandbox";
import { implementerTools } from "@/lib/agents/tools";
import { makeRepo } from "../api/helpers";
import { FAKE, leakyOutput } from "./fake-secrets";

const CONFIGURED = {
  ANTHROPIC_API_KEY: "plain-configured-anthropic-value-1234",
  GITHUB_APP_WEBHOOK_SECRET: "webhook-secret-value-5678",
  GITHUB_APP_CLIENT_SECRET: "app-client-secret-value-9012",
  GATEHOUSE_ADMIN_PASSWORD: "owner-password-value",
};

beforeAll(() => {
  Object.assign(process.env, CONFIGURED);
  process.env.GITHUB_APP_PRIVATE_KEY = FAKE.privateKey;
  resetEnvCache();
});

afterAll(() => {
  for (const name of [...Object.keys(CONFIGURED), "GITHUB_APP_PRIVATE_KEY"]) delete process.env[name];
  resetEnvCache();
});

function expectNoSecrets(text: string) {
  for (const value of [...Object.values(FAKE), ...Object.values(CONFIGURED)]) expect(text).not.toContain(value);
  expect(text).not.toMatch(/PRIVATE KEY-----\n[A-Za-z0-9+/]/);
}

describe("redaction of model and command output", () => {
  it("replaces API keys, tokens and a private key with markers and keeps the rest", () => {
    const out = redact(leakyOutput());
    expectNoSecrets(out);
    expect(out).toContain("[REDACTED:openai-key]");
    expect(out).toContain("[REDACTED:anthropic-key]");
    expect(out).toContain("[REDACTED:github-token]");
    expect(out).toContain("[REDACTED:aws-key]");
    expect(out).toContain("[REDACTED:private-key]");
    expect(out).toContain("done.");
  });

  it("replaces the values of secrets configured in env, whatever their shape", () => {
    const out = redact(`webhook=${CONFIGURED.GITHUB_APP_WEBHOOK_SECRET} client ${CONFIGURED.GITHUB_APP_CLIENT_SECRET} k ${CONFIGURED.ANTHROPIC_API_KEY}`);
    expectNoSecrets(out);
  });

  it("catches bearer headers and KEY=value assignments of unknown providers", () => {
    const out = redact("curl -H 'Authorization: Bearer abcdefghijklmnop0123456789' ; MY_SERVICE_API_KEY=q1w2e3r4t5y6u7i8o9 ; client_secret: 'zx12cv34bn56m78'");
    expect(out).not.toContain("abcdefghijklmnop0123456789");
    expect(out).not.toContain("q1w2e3r4t5y6u7i8o9");
    expect(out).not.toContain("zx12cv34bn56m78");
    expect(out).toContain("curl -H");
  });

  it("leaves ordinary text and token counts alone", () => {
    const text = "tokensIn: 123456789, maxTokens=4096, the secret sauce is tests; commit 3f9a1c2d4e5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f";
    expect(redact(text)).toBe(text);
  });

  it("redacts every string inside stored payloads (events, model calls, context)", () => {
    const payload = { stage: "implementation", output: leakyOutput(), tool: { calls: [{ stdout: FAKE.github }] }, n: 3, ok: true };
    const stored = redactDeep(payload);
    expectNoSecrets(JSON.stringify(stored));
    expect(stored).toMatchObject({ stage: "implementation", n: 3, ok: true });
  });
});

describe("logs", () => {
  afterEach(() => vi.restoreAllMocks());

  it("never contain a secret, whichever field carries it", () => {
    const lines: string[] = [];
    for (const method of ["log", "warn", "error"] as const) {
      vi.spyOn(console, method).mockImplementation((line: string) => void lines.push(line));
    }
    log.error("model call failed", { error: `401 from provider: ${leakyOutput()}`, key: CONFIGURED.ANTHROPIC_API_KEY });
    log.warn("command output", { stdout: FAKE.privateKey });
    expect(lines).toHaveLength(2);
    expectNoSecrets(lines.join("\n"));
    expect(lines[0]).toContain("model call failed");
  });
});

describe("the sandbox environment", () => {
  let sandbox: LocalSandbox | undefined;
  afterAll(async () => {
    await sandbox?.destroy();
  });

  it("baseChildEnv passes none of the app's secrets, even when process.env has all of them", () => {
    for (const name of SECRET_ENV_NAMES) process.env[name] ??= `value-of-${name}-for-the-test`;
    try {
      const env = baseChildEnv({ EXTRA: "1" });
      for (const name of SECRET_ENV_NAMES) expect(env[name], name).toBeUndefined();
      expect(Object.keys(env).sort()).toEqual(expect.arrayContaining(["EXTRA", "PATH"]));
      const child = execFileSync("env", [], { env: env as NodeJS.ProcessEnv, encoding: "utf8" });
      for (const name of SECRET_ENV_NAMES) expect(child).not.toContain(`${name}=`);
    } finally {
      for (const name of SECRET_ENV_NAMES) {
        if (process.env[name] === `value-of-${name}-for-the-test`) delete process.env[name];
      }
    }
  });

  it("a command run by the implementer sees no secrets and its leaked output comes back redacted", async () => {
    const repo = makeRepo();
    fs.writeFileSync(path.join(repo, "leak.sh"), `cat <<'EOF'\n${leakyOutput()}\nEOF\nenv\n`);
    execFileSync("git", ["add", "leak.sh"], { cwd: repo });
    execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "add leak"], { cwd: repo });
    sandbox = await LocalSandbox.create({ runId: "run_secretstest0001", repoPath: repo, ref: "main", isolation: "none" });

    const raw = await sandbox.exec("sh", ["-c", "env"]);
    for (const [name, value] of Object.entries(CONFIGURED)) {
      expect(raw.stdout, name).not.toContain(value);
      expect(raw.stdout, name).not.toContain(`${name}=`);
    }

    const tools = implementerTools({ sandbox, todos: [], filesChanged: [], progress: false });
    const result = (await tools.run_command.execute!({ command: "sh", args: ["leak.sh"] }, { toolCallId: "t1", messages: [] })) as {
      stdout: string;
      exitCode: number;
    };
    expect(result.exitCode).toBe(0);
    expectNoSecrets(result.stdout);
    expect(result.stdout).toContain("[REDACTED:private-key]");
    expect(result.stdout).toContain("done.");
  });
});
