import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { and, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { accounts, githubDeliveries, projects, users, workflowRuns } from "@/lib/db/schema";
import { createProject } from "@/lib/projects/queries";
import { setMember } from "@/lib/db/queries/members";
import { signPayload, verifySignature } from "@/lib/github/webhooks";
import { POST as webhook } from "@/app/api/github/webhook/route";
import { GET as listRepositories } from "@/app/api/github/repositories/route";
import { startWorkflowHarness, until } from "../workflow/harness";
import type { GitHubEmulator } from "./emulator";
import { configureGitHub, WEBHOOK_SECRET } from "./setup-github";

/*
 * POST /api/github/webhook: HMAC over the raw body, replay guard by delivery id, and the effects the github-webhook
 * Inngest function applies on the embedded executor.
 */

let gh: GitHubEmulator;
let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
let sequence = 0;

beforeAll(async () => {
  ({ emulator: gh } = await configureGitHub());
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
  await gh.close();
});

const ctx = { params: Promise.resolve({}) };

function deliver(event: string, payload: unknown, { id = `delivery-${++sequence}`, signature }: { id?: string; signature?: string } = {}) {
  const body = JSON.stringify(payload);
  return webhook(
    new Request("http://127.0.0.1/api/github/webhook", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": id,
        "x-hub-signature-256": signature ?? signPayload(WEBHOOK_SECRET, body),
      },
      body,
    }),
    ctx,
  );
}

async function processed(id: string) {
  const db = await getDb();
  return until(async () => {
    const [row] = await db.select().from(githubDeliveries).where(eq(githubDeliveries.id, id));
    return row?.processedAt ? row : null;
  }, `delivery ${id} to be processed`);
}

async function runsOf(projectId: string) {
  const db = await getDb();
  return db.select().from(workflowRuns).where(eq(workflowRuns.projectId, projectId));
}

async function githubUser(id: string, githubId: number) {
  const db = await getDb();
  await db.insert(users).values({ id, name: id, email: `${id}@example.com` });
  await db.insert(accounts).values({ userId: id, type: "oauth", provider: "github", providerAccountId: String(githubId) });
  return id;
}

const comment = (repo: string, githubId: number, login: string, body: string) => ({
  action: "created",
  issue: { number: 7, html_url: `${gh.url}/acme/${repo}/issues/7` },
  comment: { id: 99, body, user: { login, id: githubId, type: "User" } },
  repository: gh.repoJson(`acme/${repo}`),
  sender: { login, id: githubId },
});

describe("signatures", () => {
  it("GitHub's published HMAC test vector verifies; a changed payload or signature does not", () => {
    const secret = "It's a Secret to Everybody";
    const signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    expect(verifySignature({ secret, payload: "Hello, World!", signature })).toBe(true);
    expect(signPayload(secret, "Hello, World!")).toBe(signature);
    expect(verifySignature({ secret, payload: "Hello, World?", signature })).toBe(false);
    expect(verifySignature({ secret, payload: "Hello, World!", signature: signature.replace(/7$/, "8") })).toBe(false);
    expect(verifySignature({ secret, payload: "Hello, World!", signature: null })).toBe(false);
  });

  it("a forged signature → 401 and nothing is stored", async () => {
    const res = await deliver("ping", { zen: "hi" }, { id: "forged-1", signature: signPayload("not the secret", JSON.stringify({ zen: "hi" })) });
    expect(res.status).toBe(401);
    expect((await res.json()).error.code).toBe("unauthorized:github");
    const db = await getDb();
    expect(await db.select().from(githubDeliveries).where(eq(githubDeliveries.id, "forged-1"))).toEqual([]);
  });
});

describe("webhook effects", () => {
  it("/gatehouse from a project member starts a run once, even when the delivery is replayed", async () => {
    gh.addRepository({ owner: "acme", name: "portal" });
    const project = await createProject({
      name: "portal",
      ownerId: h.user.id,
      repository: { type: "github", owner: "acme", repo: "portal" },
      defaultConfig: { trustMode: { planning: "manual" } },
    });
    const member = await githubUser("usr_gh_member", 101);
    await setMember({ projectId: project.id, userId: member, role: "approver" });

    const payload = comment("portal", 101, "mona", "/gatehouse Add a CHANGELOG entry for 1.2");
    const first = await deliver("issue_comment", payload, { id: "comment-1" });
    expect(first.status).toBe(202);
    const row = await processed("comment-1");
    expect(row.outcome).toMatch(/"outcome":"run run_/);
    const replay = await deliver("issue_comment", payload, { id: "comment-1" });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toMatchObject({ duplicate: true });

    const runs = await runsOf(project.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.userId).toBe(member);
    expect(runs[0]!.originalRequest).toMatch(/^Add a CHANGELOG entry for 1\.2\n\n\(Requested by @mona on /);
    // The run was announced: the workflow picked it up and waits at the plan gate.
    await until(async () => (await runsOf(project.id))[0]!.status === "awaiting_approval", "the comment's run to reach its plan gate");
  });

  it("/gatehouse from a non-member, a viewer or an unknown GitHub account is ignored", async () => {
    gh.addRepository({ owner: "acme", name: "vault" });
    const project = await createProject({ name: "vault", ownerId: h.user.id, repository: { type: "github", owner: "acme", repo: "vault" } });
    await githubUser("usr_gh_stranger", 202);
    const viewer = await githubUser("usr_gh_viewer", 203);
    await setMember({ projectId: project.id, userId: viewer, role: "viewer" });

    for (const [id, githubId, login] of [["c-stranger", 202, "stranger"], ["c-viewer", 203, "viewer"], ["c-unknown", 303, "nobody"]] as const) {
      expect((await deliver("issue_comment", comment("vault", githubId, login, "/gatehouse delete everything"), { id })).status).toBe(202);
      expect((await processed(id)).outcome).toMatch(/"outcome":"ignored: /);
    }
    expect(await runsOf(project.id)).toEqual([]);
  });

  it("changes requested on a run's pull request start a follow-up run only when the project enables it", async () => {
    gh.addRepository({ owner: "acme", name: "shop" });
    const project = await createProject({
      name: "shop",
      ownerId: h.user.id,
      repository: { type: "github", owner: "acme", repo: "shop" },
      defaultConfig: { trustMode: { planning: "manual" }, github: { followUpOnReview: true } },
    });
    const member = await githubUser("usr_gh_shop", 404);
    await setMember({ projectId: project.id, userId: member, role: "approver" });
    await deliver("issue_comment", comment("shop", 404, "hubot", "/gatehouse Add a cart badge"), { id: "shop-comment" });
    await processed("shop-comment");
    const [original] = await runsOf(project.id);

    const review = (state: string) => ({
      action: "submitted",
      review: { id: 5, state, body: "Use the design token for the badge colour.", user: { login: "reviewer", id: 505 } },
      pull_request: { number: 3, head: { ref: original!.branch }, base: { ref: "main" } },
      repository: gh.repoJson("acme/shop"),
    });
    await deliver("pull_request_review", review("approved"), { id: "review-approved" });
    expect((await processed("review-approved")).outcome).toMatch(/ignored/);
    await deliver("pull_request_review", review("changes_requested"), { id: "review-changes" });
    expect((await processed("review-changes")).outcome).toMatch(/follow_up run_/);
    const runs = await runsOf(project.id);
    expect(runs).toHaveLength(2);
    const followUp = runs.find((r) => r.id !== original!.id)!;
    expect(followUp.originalRequest).toContain(`Follow-up to run ${original!.id} (pull request #3): @reviewer requested changes.`);
    expect(followUp.originalRequest).toContain("Use the design token for the badge colour.");
    // It continues the pull request's branch; GitHub has no such review (404), so the request says the comments are missing.
    expect(followUp.branch).toBe(original!.branch);
    expect(followUp.originalRequest).toContain("The review's inline comments could not be fetched");

    // The same review on a project that has not enabled follow-ups does nothing.
    const db = await getDb();
    await db.update(projects).set({ defaultConfig: { trustMode: { planning: "manual" } } }).where(eq(projects.id, project.id));
    // A new review (its own id): the very same body again would be a replay, refused before it is handled.
    await deliver("pull_request_review", { ...review("changes_requested"), review: { ...review("changes_requested").review, id: 6 } }, { id: "review-changes-disabled" });
    expect((await processed("review-changes-disabled")).outcome).toMatch(/ignored: follow-up on review is not enabled/);
    expect(await runsOf(project.id)).toHaveLength(2);
  });

  it("installation events make repositories available to connect; removed ones disappear", async () => {
    const installation = { id: 777, account: { login: "octo-org" } };
    await deliver("installation", {
      action: "created",
      installation,
      repositories: [
        { id: 9001, name: "api", full_name: "octo-org/api", private: true },
        { id: 9002, name: "web", full_name: "octo-org/web", private: false },
      ],
    }, { id: "inst-1" });
    await processed("inst-1");
    await deliver("installation_repositories", {
      action: "added",
      installation,
      repositories_added: [{ id: 9003, name: "docs", full_name: "octo-org/docs", private: false }],
      repositories_removed: [{ id: 9002, name: "web", full_name: "octo-org/web" }],
    }, { id: "inst-2" });
    await processed("inst-2");

    const res = await listRepositories(
      new Request("http://127.0.0.1/api/github/repositories", { headers: { authorization: "Bearer test-admin-token-0123456789" } }),
      ctx,
    );
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.configured).toBe(true);
    expect(body.repositories.filter((r: { installationId: number }) => r.installationId === 777)).toEqual([
      { id: 9001, installationId: 777, owner: "octo-org", repo: "api", fullName: "octo-org/api", private: true },
      { id: 9003, installationId: 777, owner: "octo-org", repo: "docs", fullName: "octo-org/docs", private: false },
    ]);

    await deliver("installation", { action: "deleted", installation }, { id: "inst-3" });
    await processed("inst-3");
    const after = await (await listRepositories(new Request("http://127.0.0.1/api/github/repositories", { headers: { authorization: "Bearer test-admin-token-0123456789" } }), ctx)).json();
    expect(after.repositories.filter((r: { installationId: number }) => r.installationId === 777)).toEqual([]);
  });
});
