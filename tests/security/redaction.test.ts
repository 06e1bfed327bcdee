import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { workflowEvents, workflowRuns } from "@/lib/db/schema";
import { createRun } from "@/lib/db/queries/runs";
import { resetEnvCache } from "@/lib/env";
import { implementerTools } from "@/lib/agents/tools";
import { containsSecret, redact, redactBase64File } from "@/lib/redact";
import type { Sandbox } from "@/lib/sandbox/types";
import { makeWorld, type World } from "../auth/fixtures";
import { FAKE } from "./fake-secrets";

/* Finding 2: secrets were redacted in logs and some outputs, but not in RUN_CREATED, executor steps, commits or the branch. */

const TOKEN = "admin-token-for-redaction-0123456789abcd";
let world: World;

beforeAll(async () => {
  process.env.GATEHOUSE_ADMIN_TOKEN = TOKEN;
  resetEnvCache();
  world = await makeWorld();
});
afterAll(() => {
  process.env.GATEHOUSE_ADMIN_TOKEN = "test-admin-token-0123456789";
  resetEnvCache();
});

describe("finding 2: redaction of configured secrets and key shapes", () => {
  it("a prefix of 8 or more characters of a configured secret is redacted (the 80-character title cut)", () => {
    const title = `Rotate ${TOKEN}`.slice(0, 40);
    expect(title).toContain(TOKEN.slice(0, 30));
    expect(redact(title)).toBe("Rotate [REDACTED]");
    expect(redact(`x ${TOKEN.slice(0, 8)} y`)).toBe("x [REDACTED] y");
    expect(redact(`x ${TOKEN.slice(0, 7)} y`)).toBe(`x ${TOKEN.slice(0, 7)} y`);
  });

  it("a short configured secret (under 16 characters) is matched whole, so its word-like prefix does not mangle text", () => {
    process.env.OPENAI_COMPATIBLE_API_KEY = "scripted-key";
    resetEnvCache();
    try {
      expect(redact("implementer: openai-compatible:scripted")).toBe("implementer: openai-compatible:scripted");
      expect(redact("key scripted-key here")).toBe("key [REDACTED] here");
    } finally {
      delete process.env.OPENAI_COMPATIBLE_API_KEY;
      resetEnvCache();
    }
  });

  it("base64, base64url and URL-encoded forms of a configured secret are redacted, at any alignment", () => {
    for (const lead of ["", "a", "ab", "KEY=", "token: "]) {
      const b64 = Buffer.from(`${lead}${TOKEN}\n`).toString("base64");
      const b64url = Buffer.from(`${lead}${TOKEN}`).toString("base64url");
      for (const encoded of [b64, b64url]) {
        const out = redact(`blob ${encoded} end`);
        expect(out, `${lead} ${encoded}`).toContain("[REDACTED]");
        expect(Buffer.from(out.slice(5, -4), "base64").toString()).not.toContain(TOKEN.slice(0, 12));
      }
    }
    expect(redact(`https://example.com/?t=${encodeURIComponent(`${TOKEN} x`)}`)).not.toContain(TOKEN.slice(0, 8));
  });

  it("unconfigured key shapes are redacted: sk-…, ghp_…, github_pat_…, PEM private keys, also when cut short", () => {
    const pat = ["github", "_pat_", "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"].join("");
    for (const key of [FAKE.openai, FAKE.anthropic, FAKE.github, pat, FAKE.privateKey, FAKE.github.slice(0, 24), FAKE.openai.slice(0, 24)]) {
      expect(containsSecret(`value: ${key}`), key.slice(0, 12)).toBe(true);
      expect(redact(key)).not.toContain(key.slice(4, 20));
    }
  });

  it("every known key shape is redacted when it stands alone in a text (none is skipped by the quick pre-check)", () => {
    const j = (...parts: string[]) => parts.join("");
    const shapes: Record<string, string> = {
      "gatehouse-token": j("gh", "_pat_", "abcdefghijklmnop0123"),
      // The API token prefix since issue 32 (gh_pat_ read as a GitHub token); both are Gatehouse's.
      "gatehouse-api-token": j("gatehouse", "_api_", "abcdefghijklmnop0123"),
      "google-key": j("AI", "za", "SyA1234567890abcdefghijklmnopqrstuv"),
      "aws-key": j("AS", "IA", "IOSFODNN7EXAMPLE"),
      "slack-token": j("xo", "xb-", "1234567890-abcdef"),
      "e2b-key": j("e2", "b_", "0123456789abcdefghijABCD"),
      "inngest-key": j("sign", "key-", "prod-", "0123456789abcdef0123"),
      jwt: j("ey", "J", "hbGciOiJIUzI1NiJ9", ".", "eyJzdWIiOiIxMjM0NSJ9", ".", "c2lnbmF0dXJlLXBhcnQ"),
      bearer: j("Authorization: ", "Bearer ", "abcdefghij0123456789"),
      named: j("db_pass", "word=", "hunter2hunter2"),
    };
    for (const [kind, text] of Object.entries(shapes)) {
      expect(redact(`plain words, then ${text}`), kind).toMatch(/\[REDACTED(:[a-z0-9-]+)?\]/);
    }
    // Ordinary text passes untouched.
    expect(redact("Write the note in docs/requests/greeting.md and update the index.")).toBe("Write the note in docs/requests/greeting.md and update the index.");
  });

  it("an uploaded text file is redacted inside its base64", () => {
    const file = Buffer.from(`line one\nkey=${FAKE.openai}\nline three\n`).toString("base64");
    const clean = Buffer.from(redactBase64File(file), "base64").toString("utf8");
    expect(clean).not.toContain(FAKE.openai);
    expect(clean).toContain("line three");
  });

  it("the run row, the RUN_CREATED event and the branch name hold no secret from the request", async () => {
    const run = await createRun({
      projectId: world.project.id,
      userId: world.owner.id,
      request: `${TOKEN} deploy with ${FAKE.github}`,
      config: { note: FAKE.openai } as never,
    });
    const db = await getDb();
    const [row] = await db.select().from(workflowRuns).where(eq(workflowRuns.id, run.id));
    const events = await db.select().from(workflowEvents).where(eq(workflowEvents.workflowRunId, run.id));
    const stored = JSON.stringify({ row, events });
    for (const secret of [TOKEN, FAKE.github, FAKE.openai]) {
      expect(stored).not.toContain(secret.slice(0, 10));
      expect(row!.branch).not.toContain(secret.slice(0, 8).toLowerCase());
    }
    expect(row!.branch).toMatch(/^autonomous\/run_[a-z0-9]+-redacted-deploy-with-redacted/);
  });

  it("the implementer may not write a secret into a file or a command line: 'Secret detected', nothing written", async () => {
    const writes: string[] = [];
    const runs: string[] = [];
    const sandbox = {
      readFile: async () => {
        throw Object.assign(new Error("missing"), { code: "ENOENT" });
      },
      writeFile: async (p: string) => void writes.push(p),
      exec: async (c: string) => {
        runs.push(c);
        return { exitCode: 0, stdout: "", stderr: "", timedOut: false };
      },
    } as unknown as Sandbox;
    const tools = implementerTools({ sandbox, todos: [], filesChanged: [], progress: false });
    const opts = { toolCallId: "t", messages: [] };
    await expect(tools.write_file.execute!({ path: "config.ts", content: `export const key = "${FAKE.openai}";` }, opts)).rejects.toThrow(/Secret detected/);
    await expect(tools.write_file.execute!({ path: ".env", content: `TOKEN=${TOKEN.slice(0, 20)}` }, opts)).rejects.toThrow(/Secret detected/);
    await expect(tools.run_command.execute!({ command: "sh", args: ["-c", `echo ${FAKE.github} > k`] }, opts)).rejects.toThrow(/Secret detected/);
    expect(writes).toEqual([]);
    expect(runs).toEqual([]);
  });
});

describe("what stops a commit or a command is only a certain secret", () => {
  it("ordinary code that names tokens and passwords is neither refused nor paused on; a real key shape is", async () => {
    const { holdsSecret, containsSecret } = await import("@/lib/redact");
    const code = [
      'const token = process.env.GITHUB_TOKEN_FOR_TESTS;',
      "$last_update_token = $o->{clock};",
      "password: config.database.passwordFromVault,",
    ];
    for (const line of code) {
      // Logs still redact the guess (over-redaction is harmless there) …
      expect(containsSecret(line)).toBe(true);
      // … but a write or a commit is not stopped by it.
      expect(holdsSecret(line)).toBe(false);
    }
    expect(holdsSecret("const key = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789';")).toBe(true);
    expect(holdsSecret("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----")).toBe(true);
  });
});
