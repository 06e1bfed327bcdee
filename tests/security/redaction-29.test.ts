import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import * as tokensRoute from "@/app/api/tokens/route";
import * as projectsRoute from "@/app/api/projects/route";
import * as projectRoute from "@/app/api/projects/[id]/route";
import * as membersRoute from "@/app/api/projects/[id]/members/route";
import { PUT as putChannel } from "@/app/api/projects/[id]/notifications/[kind]/route";
import { POST as webhook } from "@/app/api/github/webhook/route";
import { getClient, getDb } from "@/lib/db";
import { githubDeliveries } from "@/lib/db/schema";
import { resetEnvCache } from "@/lib/env";
import { signPayload } from "@/lib/github/webhooks";
import { holdsSecret, redact } from "@/lib/redact";
import { ADMIN, call, makeRepo } from "../api/helpers";
import { startWorkflowHarness } from "../workflow/harness";
import { FAKE } from "./fake-secrets";

/*
 * Issue #29, finding 7: redaction gaps. Key shapes it did not recognise (a bare AWS secret access key, keys glued to a
 * preceding word character), and free-text fields stored and returned raw (token and project names; a Slack channel
 * and an invitation email, which are refused instead; signed webhook payloads in github_deliveries).
 */

const j = (...parts: string[]) => parts.join("");
/** AWS's documented example secret access key, built from parts so this file holds no key-shaped string. */
const AWS_SECRET = j("wJalrXUtnFEMI", "/K7MDENG/", "bPxRfiCYEXAMPLEKEY");
const SECRET = "whsec-redaction-29-0123456789";

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  process.env.GITHUB_APP_WEBHOOK_SECRET = SECRET;
  resetEnvCache();
  h = await startWorkflowHarness();
});
afterAll(async () => {
  delete process.env.GITHUB_APP_WEBHOOK_SECRET;
  resetEnvCache();
  await h.close();
});

async function dump(sql: string): Promise<string> {
  const client = await getClient();
  return JSON.stringify((await client.execute(sql)).rows);
}

describe("hardening #29.7 redaction gaps", () => {
  it("hardening #29.7 a bare 40-character AWS secret access key is redacted and stops a commit; git shas, paths and words are not", () => {
    expect(AWS_SECRET).toHaveLength(40);
    expect(redact(`aws configure set region eu-west-1\nkey ${AWS_SECRET}\n`)).toBe("aws configure set region eu-west-1\nkey [REDACTED:aws-secret-key]\n");
    expect(redact(`"${AWS_SECRET}",`)).toBe('"[REDACTED:aws-secret-key]",');
    expect(holdsSecret(AWS_SECRET)).toBe(true);
    const ordinary = [
      "commit 9fceb02d0ae598e95dc970b74764d5b3e4e1e3b2", // a git sha: 40 hex digits, no upper case
      "see src/components/settings/ThemeToggle.tsx", // a path: broken by the dot
      "ThisIsAVeryLongIdentifierWithoutAnyDigit", // 40 characters, no digit
      `sha512-${AWS_SECRET}${AWS_SECRET}==`, // a longer base64 run
    ];
    for (const text of ordinary) expect(redact(text)).toBe(text);
  });

  it("hardening #29.7 keys glued to a preceding word character are redacted (x_sk-ant-…, 1ghp_…), ordinary words are not", () => {
    expect(redact(`x_${FAKE.anthropic}`)).toBe("x_[REDACTED:anthropic-key]");
    expect(redact(`1${FAKE.github}`)).toBe("1[REDACTED:github-token]");
    expect(redact(`export KEY_${FAKE.aws}`)).toBe("export KEY_[REDACTED:aws-key]");
    expect(redact(`v2${FAKE.openai}`)).toBe("v2[REDACTED:openai-key]");
    expect(holdsSecret(`prefix_${FAKE.anthropic}`)).toBe(true);
    for (const text of ["task-management-service-worker-v2", "the_graphs_TotalBytesPerSecond", "risk-assessment-framework-2024"]) {
      expect(redact(text)).toBe(text);
    }
  });

  it("hardening #29.7 token names and project names holding a key are stored and returned redacted", async () => {
    const token = await call(tokensRoute.POST, { method: "POST", path: "/api/tokens", headers: ADMIN, body: { name: `ci ${FAKE.anthropic}` } });
    expect(token.status).toBe(201);
    expect(token.json.name).toBe("ci [REDACTED:anthropic-key]");
    const listed = await call(tokensRoute.GET, { path: "/api/tokens", headers: ADMIN });
    expect(JSON.stringify(listed.json)).not.toContain(FAKE.anthropic.slice(8));

    const created = await call(projectsRoute.POST, {
      method: "POST",
      path: "/api/projects",
      headers: ADMIN,
      body: { name: `app ${AWS_SECRET}`, repository: { type: "local", path: makeRepo() } },
    });
    expect(created.status).toBe(201);
    expect(created.json.project.name).toBe("app [REDACTED:aws-secret-key]");
    const renamed = await call(projectRoute.PATCH, {
      method: "PATCH",
      path: `/api/projects/${created.json.project.id}`,
      params: { id: created.json.project.id },
      headers: ADMIN,
      body: { name: `app ${FAKE.github}` },
    });
    expect(renamed.status).toBe(200);
    expect(JSON.stringify(renamed.json)).toContain("app [REDACTED:github-token]");

    const stored = await dump("SELECT name FROM api_tokens UNION ALL SELECT name FROM projects");
    for (const key of [FAKE.anthropic, AWS_SECRET, FAKE.github]) expect(stored).not.toContain(key.slice(8));
  });

  it("hardening #29.7 an invitation email or a Slack channel holding a key is refused with a 400 naming the field", async () => {
    const project = await call(projectsRoute.POST, {
      method: "POST",
      path: "/api/projects",
      headers: ADMIN,
      body: { name: "invites", repository: { type: "local", path: makeRepo() } },
    });
    const params = { id: project.json.project.id };
    const invite = await call(membersRoute.POST, { method: "POST", params, headers: ADMIN, body: { email: `${FAKE.github}@example.com`, role: "approver" } });
    expect(invite.status).toBe(400);
    expect(invite.json.error.message).toMatch(/^email: must not hold a secret/);
    const slack = await call(putChannel, {
      method: "PUT",
      params: { ...params, kind: "slack" },
      headers: ADMIN,
      body: { config: { channel: `#ops-${FAKE.openai}` }, secret: j("xoxb-", "98765-43210-slacktoken") },
    });
    expect(slack.status).toBe(400);
    expect(slack.json.error.message).toMatch(/^config\.channel: must not hold a secret/);
    const stored = await dump("SELECT email FROM project_invitations UNION ALL SELECT config FROM notification_channels");
    expect(stored).not.toContain(FAKE.github.slice(8));
    expect(stored).not.toContain(FAKE.openai.slice(8));
  });

  it("hardening #29.7 a signed GitHub webhook payload carrying a key is stored redacted in github_deliveries", async () => {
    const body = JSON.stringify({
      action: "created",
      issue: { number: 3, html_url: "https://github.example/acme/x/issues/3" },
      comment: { id: 99, body: `here is the key ${FAKE.anthropic} and ${AWS_SECRET}`, user: { login: "mona", id: 1, type: "User" } },
      repository: { name: "nobody-binds-this", owner: { login: "acme" } },
    });
    const res = await webhook(
      new Request("http://127.0.0.1/api/github/webhook", {
        method: "POST",
        headers: { "content-type": "application/json", "x-github-event": "issue_comment", "x-github-delivery": "redaction-29", "x-hub-signature-256": signPayload(SECRET, body) },
        body,
      }),
      { params: Promise.resolve({}) },
    );
    expect(res.status).toBe(202);
    const db = await getDb();
    const [row] = await db.select().from(githubDeliveries).where(eq(githubDeliveries.id, "redaction-29"));
    expect((row!.payload as { comment: { body: string } }).comment.body).toBe("here is the key [REDACTED:anthropic-key] and [REDACTED:aws-secret-key]");
    expect(await dump("SELECT payload FROM github_deliveries")).not.toContain(FAKE.anthropic.slice(8));
  });
});
