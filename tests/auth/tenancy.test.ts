import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import * as projectsRoute from "@/app/api/projects/route";
import * as projectRoute from "@/app/api/projects/[id]/route";
import * as membersRoute from "@/app/api/projects/[id]/members/route";
import * as projectInvitationsRoute from "@/app/api/projects/[id]/invitations/route";
import * as projectInvitationRoute from "@/app/api/projects/[id]/invitations/[invitationId]/route";
import * as myInvitationsRoute from "@/app/api/invitations/route";
import * as acceptRoute from "@/app/api/invitations/[id]/accept/route";
import * as declineRoute from "@/app/api/invitations/[id]/decline/route";
import { POST as webhook } from "@/app/api/github/webhook/route";
import { getDb, write } from "@/lib/db";
import { accounts, githubDeliveries, projects, workflowRuns } from "@/lib/db/schema";
import { createProject } from "@/lib/projects/queries";
import { setMember } from "@/lib/db/queries/members";
import { backfillRepositoryKeys, isRepositoryKeyConflict } from "@/lib/db/repository-key";
import { getEnv, resetEnvCache } from "@/lib/env";
import { resetRateLimits } from "@/lib/security/rate-limit";
import { signPayload } from "@/lib/github/webhooks";
import { makeRepo } from "../api/helpers";
import type { GitHubEmulator } from "../github/emulator";
import { configureGitHub, WEBHOOK_SECRET } from "../github/setup-github";
import { startWorkflowHarness, until } from "../workflow/harness";
import { bearer, call, makeUser, type TestUser } from "./fixtures";

/*
 * Who may bind what (issue #12): local paths only for instance administrators, inside GATEHOUSE_REPOSITORIES_ROOT and
 * never Gatehouse's own directories, errors that never reveal what exists; one project per repository; GitHub
 * bindings only with the App's installation and the user's write access; webhooks to exactly one project; members by
 * invitation.
 */

const OWNER = bearer(process.env.GATEHOUSE_ADMIN_TOKEN!);
const ENV_KEYS = ["GATEHOUSE_ADMIN_EMAILS", "GATEHOUSE_REPOSITORIES_ROOT", "GATEHOUSE_DATA_DIR"] as const;
const savedEnv = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));
const savedCwd = process.cwd();

let mallory: TestUser; // signed in, no special rights
let ada: TestUser; // an instance administrator by GATEHOUSE_ADMIN_EMAILS

function setEnv(values: Partial<Record<(typeof ENV_KEYS)[number], string | undefined>>) {
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  resetEnvCache();
}

beforeAll(async () => {
  mallory = await makeUser("Mallory", "mallory@example.com");
  ada = await makeUser("Ada", "ada@example.com");
  setEnv({ GATEHOUSE_ADMIN_EMAILS: " Other@example.com, ADA@example.com " });
});

afterEach(() => {
  // These tests bind dozens of projects as one owner; the per-user creation budget is proven in smaller-findings.
  resetRateLimits();
  process.chdir(savedCwd);
  setEnv({ ...savedEnv, GATEHOUSE_ADMIN_EMAILS: " Other@example.com, ADA@example.com " });
});

afterAll(() => setEnv(savedEnv));

const bind = (headers: Record<string, string>, repository: unknown, name = "bound") =>
  call(projectsRoute.POST, { method: "POST", headers, body: { name, repository } });

async function projectCount() {
  const db = await getDb();
  return (await db.select({ id: projects.id }).from(projects)).length;
}

function gitInit(dir: string) {
  fs.mkdirSync(dir, { recursive: true });
  execFileSync("git", ["init", "-q", "-b", "main"], { cwd: dir });
  return dir;
}

const tmp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), `gatehouse-tenancy-${prefix}-`));

describe("local paths: only instance administrators", () => {
  it("a signed-in user who is not an administrator → 403, for an existing repository and a missing path alike, and nothing is stored", async () => {
    const before = await projectCount();
    const existing = await bind(mallory.headers, { type: "local", path: makeRepo() });
    const missing = await bind(mallory.headers, { type: "local", path: "/definitely/not/here" });
    expect(existing.status).toBe(403);
    expect(existing.json.error.code).toBe("forbidden:project");
    expect(existing.json.error.message).toMatch(/instance administrator/);
    // The refusal comes before the filesystem is looked at: the answers are the same.
    expect(missing.status).toBe(403);
    expect(missing.json).toEqual(existing.json);
    expect(await projectCount()).toBe(before);
  });

  it("an administrator named in GATEHOUSE_ADMIN_EMAILS (any case) and the local owner may bind; the realpath is stored", async () => {
    const byAda = await bind(ada.headers, { type: "local", path: makeRepo() });
    expect(byAda.status).toBe(201);
    const repo = makeRepo();
    const byOwner = await bind(OWNER, { type: "local", path: `/proc/self/root${repo}/.git/../` });
    expect(byOwner.status).toBe(201);
    expect(byOwner.json.project.repository).toEqual({ type: "local", path: fs.realpathSync(repo) });
    // The same user without the env entry is an ordinary user again.
    setEnv({ GATEHOUSE_ADMIN_EMAILS: "other@example.com" });
    expect((await bind(ada.headers, { type: "local", path: makeRepo() })).status).toBe(403);
  });

  it("a non-administrator cannot switch an existing project to a local path with PATCH either", async () => {
    const created = await bind(OWNER, { type: "local", path: makeRepo() });
    await setMember({ projectId: created.json.project.id, userId: mallory.id, role: "owner" });
    const res = await call(projectRoute.PATCH, {
      method: "PATCH",
      headers: mallory.headers,
      params: { id: created.json.project.id },
      body: { repository: { type: "local", path: makeRepo() } },
    });
    expect(res.status).toBe(403);
    // A rename needs no administrator.
    const renamed = await call(projectRoute.PATCH, { method: "PATCH", headers: mallory.headers, params: { id: created.json.project.id }, body: { name: "renamed" } });
    expect(renamed.status).toBe(200);
  });
});

describe("one project per repository", () => {
  it("another spelling of a bound repository (trailing slash, .git/.., a symlink, /proc/self/root) → 409 naming nothing of the other project", async () => {
    const repo = makeRepo();
    const first = await bind(OWNER, { type: "local", path: repo }, "secret first project");
    expect(first.status).toBe(201);
    const link = path.join(tmp("link"), "alias");
    fs.symlinkSync(repo, link);
    const before = await projectCount();
    for (const spelling of [repo, `${repo}/`, `${repo}/.git/..`, `${repo}/./`, link, `/proc/self/root${repo}`]) {
      const res = await bind(OWNER, { type: "local", path: spelling });
      expect(res.status, spelling).toBe(409);
      expect(res.json.error.message, spelling).toBe("repository: this repository is already bound to another project.");
      expect(JSON.stringify(res.json)).not.toContain(first.json.project.id);
      expect(JSON.stringify(res.json)).not.toContain("secret first project");
    }
    expect(await projectCount()).toBe(before);
  });

  it("PATCHing another project onto a bound repository → 409; keeping its own repository is fine", async () => {
    const a = makeRepo();
    const b = makeRepo();
    const first = await bind(OWNER, { type: "local", path: a });
    const second = await bind(OWNER, { type: "local", path: b });
    const clash = await call(projectRoute.PATCH, { method: "PATCH", headers: OWNER, params: { id: second.json.project.id }, body: { repository: { type: "local", path: `${a}/` } } });
    expect(clash.status).toBe(409);
    const same = await call(projectRoute.PATCH, { method: "PATCH", headers: OWNER, params: { id: first.json.project.id }, body: { repository: { type: "local", path: `${a}/.git/..` } } });
    expect(same.status).toBe(200);
  });

  it("concurrent creates of one repository: exactly one wins, the database's unique key decides", async () => {
    const repo = makeRepo();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => bind(OWNER, { type: "local", path: i % 2 ? `${repo}/` : repo }, `race ${i}`)),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    // Written around the app's check, the index still refuses a second row for the same key.
    const db = await getDb();
    const [row] = await db.select().from(projects).where(eq(projects.id, results.find((r) => r.status === 201)!.json.project.id));
    await expect(
      write((tx) => tx.insert(projects).values({ id: "prj_dup", name: "dup", ownerId: row!.ownerId, repository: row!.repository, repositoryKey: row!.repositoryKey })),
    ).rejects.toSatisfy(isRepositoryKeyConflict);
  });
});

describe("projects from before one-project-per-repository", () => {
  it("get their repository key once at start-up; of two sharing a repository the older keeps it", async () => {
    const db = await getDb();
    const owner = await ownerId();
    const repo = makeRepo();
    await db.insert(projects).values([
      { id: "prj_legacy_a", name: "legacy a", ownerId: owner, repository: { type: "local", path: repo }, createdAt: new Date(1000) },
      { id: "prj_legacy_b", name: "legacy b", ownerId: owner, repository: { type: "local", path: repo }, createdAt: new Date(2000) },
      { id: "prj_legacy_gh", name: "legacy gh", ownerId: owner, repository: { type: "github", owner: "Legacy", repo: "Thing" }, createdAt: new Date(3000) },
    ]);
    await backfillRepositoryKeys(db);
    const keys = Object.fromEntries(
      (await db.select({ id: projects.id, key: projects.repositoryKey }).from(projects)).filter((r) => r.id.startsWith("prj_legacy")).map((r) => [r.id, r.key]),
    );
    expect(keys).toEqual({ prj_legacy_a: `local:${repo}`, prj_legacy_b: null, prj_legacy_gh: "github:legacy/thing" });
    expect((await bind(OWNER, { type: "local", path: repo })).status).toBe(409);
  });
});

describe("GitHub bindings without a GitHub App on the server", () => {
  it("only an instance administrator may bind, unverified and by name; others → 403; a second binding → 409", async () => {
    expect(getEnv().GITHUB_APP_ID).toBeUndefined();
    const byMallory = await bind(mallory.headers, { type: "github", owner: "acme", repo: "legacy" });
    expect(byMallory.status).toBe(403);
    expect(byMallory.json.error.message).toMatch(/GitHub App is not configured/);
    const byAda = await bind(ada.headers, { type: "github", owner: "acme", repo: "legacy" }, "legacy by name");
    expect(byAda.status).toBe(201);
    expect(byAda.json.project.repository).toEqual({ type: "github", owner: "acme", repo: "legacy" });
    expect((await bind(OWNER, { type: "github", owner: "Acme", repo: "Legacy" })).status).toBe(409);
  });
});

describe("where a local path may point", () => {
  it("outside GATEHOUSE_REPOSITORIES_ROOT → 400 with exactly the message a missing path, a file or a plain directory gets", async () => {
    const root = tmp("root");
    const inside = gitInit(path.join(root, "team", "app"));
    fs.writeFileSync(path.join(inside, "README.md"), "x");
    const outside = makeRepo();
    const escape = path.join(root, "escape");
    fs.symlinkSync(outside, escape);
    const file = path.join(root, "file.txt");
    fs.writeFileSync(file, "x");
    const plain = path.join(root, "plain");
    fs.mkdirSync(plain);
    const dotGitFile = path.join(root, "gitfile");
    fs.mkdirSync(dotGitFile);
    fs.writeFileSync(path.join(dotGitFile, ".git"), `gitdir: ${outside}/.git\n`);
    setEnv({ GATEHOUSE_REPOSITORIES_ROOT: root });

    const answers = [];
    for (const p of [outside, escape, `${root}/../${path.basename(outside)}`, `${root}/missing`, file, plain, dotGitFile, root]) {
      const res = await bind(OWNER, { type: "local", path: p });
      expect(res.status, p).toBe(400);
      answers.push(res.json);
    }
    for (const answer of answers) expect(answer).toEqual(answers[0]);
    expect(answers[0].error.message).toBe(
      `The path on the server must be an existing git repository inside ${fs.realpathSync(root)} (not Gatehouse's own checkout or data directory).`,
    );
    expect((await bind(OWNER, { type: "local", path: inside })).status).toBe(201);
  });

  it("the data directory, anything inside it and anything containing it are refused, with the same message", async () => {
    const parent = gitInit(tmp("data-parent"));
    const dataDir = gitInit(path.join(parent, "data"));
    const nested = gitInit(path.join(dataDir, "workspaces", "run_1"));
    setEnv({ GATEHOUSE_DATA_DIR: dataDir });
    const missing = (await bind(OWNER, { type: "local", path: "/definitely/not/here" })).json;
    for (const p of [dataDir, `${dataDir}/`, nested, parent]) {
      const res = await bind(OWNER, { type: "local", path: p });
      expect(res.status, p).toBe(400);
      expect(res.json, p).toEqual(missing);
    }
  });

  it("the app's own checkout, anything inside it and anything containing it are refused", async () => {
    const parent = gitInit(tmp("checkout-parent"));
    const checkout = gitInit(path.join(parent, "gatehouse"));
    const inside = gitInit(path.join(checkout, "fixtures", "repo"));
    process.chdir(checkout);
    resetEnvCache();
    expect(getEnv().appDir).toBe(fs.realpathSync(checkout));
    const missing = (await bind(OWNER, { type: "local", path: "/definitely/not/here" })).json;
    for (const p of [checkout, inside, parent, `${checkout}/.git/..`]) {
      const res = await bind(OWNER, { type: "local", path: p });
      expect(res.status, p).toBe(400);
      expect(res.json, p).toEqual(missing);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// GitHub

let gh: GitHubEmulator;
let harness: Awaited<ReturnType<typeof startWorkflowHarness>>;
let sequence = 0;

async function withGitHubIdentity(user: TestUser, githubId: number, login: string) {
  const db = await getDb();
  await db.insert(accounts).values({ userId: user.id, type: "oauth", provider: "github", providerAccountId: String(githubId) });
  gh.addUser({ id: githubId, login });
}

describe("GitHub bindings", () => {
  let writer: TestUser;
  let reader: TestUser;
  let maintainer: TestUser;
  let noIdentity: TestUser;
  let api: { installationId: number; repoId: number };
  let web: { installationId: number; repoId: number };

  beforeAll(async () => {
    ({ emulator: gh } = await configureGitHub());
    harness = await startWorkflowHarness();
    api = gh.addRepository({ owner: "acme", name: "api" });
    web = gh.addRepository({ owner: "acme", name: "web", installationId: api.installationId });
    gh.addRepository({ owner: "acme", name: "gone", installationId: api.installationId });
    gh.addRepository({ owner: "other", name: "lib" });
    writer = await makeUser("Writer", "writer@example.com");
    reader = await makeUser("Reader", "reader@example.com");
    maintainer = await makeUser("Maintainer", "maintainer@example.com");
    noIdentity = await makeUser("Plain", "plain@example.com");
    await withGitHubIdentity(writer, 501, "wendy");
    await withGitHubIdentity(reader, 502, "rita");
    await withGitHubIdentity(maintainer, 503, "mo");
    for (const repo of ["acme/api", "acme/web", "acme/gone"]) {
      gh.setCollaborator(repo, "wendy", "write");
      gh.setCollaborator(repo, "rita", "read");
    }
    gh.setCollaborator("acme/web", "mo", "maintain");
  });

  afterAll(async () => {
    await harness?.close();
    await gh?.close();
  });

  it("a repository the user can only read → 403; a user with no GitHub identity → 403 saying to sign in with GitHub", async () => {
    const read = await bind(reader.headers, { type: "github", owner: "acme", repo: "api" });
    expect(read.status).toBe(403);
    expect(read.json.error.message).toMatch(/@rita has no write access to acme\/api/);
    const plain = await bind(noIdentity.headers, { type: "github", owner: "acme", repo: "api" });
    expect(plain.status).toBe(403);
    expect(plain.json.error.message).toMatch(/Sign in with GitHub/);
    // Asked of GitHub, with the installation's token.
    expect(gh.requests).toContain("GET /repos/acme/api/collaborators/rita/permission");
  });

  it("a repository the App's installation does not cover → 403: not installed, uninstalled, or another installation's id", async () => {
    gh.uninstall("acme/gone");
    for (const repository of [
      { type: "github", owner: "acme", repo: "missing" },
      { type: "github", owner: "acme", repo: "gone" },
      { type: "github", owner: "acme", repo: "api", installationId: api.installationId + 999 },
    ]) {
      const res = await bind(writer.headers, repository);
      expect(res.status, JSON.stringify(repository)).toBe(403);
      expect(res.json.error.message).toMatch(/GitHub App is not installed on/);
    }
  });

  it("GitHub failing while the binding is checked → 503 and nothing bound", async () => {
    const before = await projectCount();
    gh.fail(/^GET \/repos\/acme\/api\/installation$/, 4, 502);
    const res = await bind(writer.headers, { type: "github", owner: "acme", repo: "api" });
    expect(res.status).toBe(503);
    expect(res.json.error.code).toBe("unavailable:github");
    expect(await projectCount()).toBe(before);
  });

  it("write access → 201 with GitHub's repository id and installation stored; maintain is enough; a second binding → 409", async () => {
    const res = await bind(writer.headers, { type: "github", owner: "acme", repo: "api" }, "api project");
    expect(res.status).toBe(201);
    expect(res.json.project.repository).toEqual({ type: "github", owner: "acme", repo: "api", installationId: api.installationId, repositoryId: api.repoId });
    const byMaintainer = await bind(maintainer.headers, { type: "github", owner: "acme", repo: "web" }, "web project");
    expect(byMaintainer.status).toBe(201);
    const again = await bind(writer.headers, { type: "github", owner: "acme", repo: "api" }, "squatter");
    expect(again.status).toBe(409);
    expect(again.json.error.message).toBe("repository: this repository is already bound to another project.");
    // Bound earlier by name only (no App then): the verified binding, keyed by id, still finds it taken.
    gh.addRepository({ owner: "acme", name: "legacy", installationId: api.installationId });
    gh.setCollaborator("acme/legacy", "wendy", "admin");
    expect((await bind(writer.headers, { type: "github", owner: "acme", repo: "legacy" })).status).toBe(409);
  });

  it("webhooks reach exactly the project bound to the repository's id (two projects, renamed and recreated repositories)", async () => {
    const [apiProject, webProject] = (await Promise.all(
      ["api project", "web project"].map(async (name) => {
        const db = await getDb();
        const [row] = await db.select().from(projects).where(eq(projects.name, name));
        // Runs from comments wait at the plan gate.
        await db.update(projects).set({ defaultConfig: { trustMode: { planning: "manual" } } }).where(eq(projects.id, row!.id));
        return row!;
      }),
    )) as [typeof projects.$inferSelect, typeof projects.$inferSelect];
    await setMember({ projectId: webProject.id, userId: writer.id, role: "approver" });
    const runsOf = async (projectId: string) => (await getDb()).select().from(workflowRuns).where(eq(workflowRuns.projectId, projectId));
    const comment = (repository: Record<string, unknown>, body: string) => ({
      action: "created",
      issue: { number: 1, html_url: `${gh.url}/${repository.full_name}/issues/1` },
      comment: { id: 1, body, user: { login: "wendy", id: 501, type: "User" } },
      repository,
      sender: { login: "wendy", id: 501 },
    });

    await deliver("issue_comment", comment(gh.repoJson("acme/web"), "/gatehouse Add a footer"), "route-web");
    expect((await processed("route-web")).outcome).toMatch(/"outcome":"run run_/);
    expect((await runsOf(webProject.id)).map((r) => r.originalRequest)).toEqual([expect.stringMatching(/^Add a footer/)]);
    expect(await runsOf(apiProject.id)).toEqual([]);

    // Renamed on GitHub: the id still finds the project.
    await deliver("issue_comment", comment({ ...gh.repoJson("acme/web"), name: "site", full_name: "acme/site" }, "/gatehouse Add a header"), "route-renamed");
    expect((await processed("route-renamed")).outcome).toMatch(/"outcome":"run run_/);
    expect(await runsOf(webProject.id)).toHaveLength(2);

    // A different repository now called acme/api (deleted and recreated: a new id) is not the bound one.
    await deliver("issue_comment", comment({ ...gh.repoJson("acme/api"), id: 987654 }, "/gatehouse Delete everything"), "route-recreated");
    expect((await processed("route-recreated")).outcome).toMatch(/ignored: no project is bound/);
    expect(await runsOf(apiProject.id)).toEqual([]);
    expect(await runsOf(webProject.id)).toHaveLength(2);
  });
});

function deliver(event: string, payload: unknown, id = `tenancy-${++sequence}`) {
  const body = JSON.stringify(payload);
  return webhook(
    new Request("http://127.0.0.1/api/github/webhook", {
      method: "POST",
      headers: { "content-type": "application/json", "x-github-event": event, "x-github-delivery": id, "x-hub-signature-256": signPayload(WEBHOOK_SECRET, body) },
      body,
    }),
    { params: Promise.resolve({}) },
  );
}

async function processed(id: string) {
  const db = await getDb();
  return until(async () => {
    const [row] = await db.select().from(githubDeliveries).where(eq(githubDeliveries.id, id));
    return row?.processedAt ? row : null;
  }, `delivery ${id} to be processed`);
}

// ---------------------------------------------------------------------------------------------------------------------
// Members by invitation

describe("members by invitation", () => {
  it("adding someone answers the same for a known and an unknown email, and makes nobody a member", async () => {
    const project = await createProject({ name: "invites", ownerId: (await ownerId()), repository: { type: "local", path: makeRepo() } });
    const known = await makeUser("Known", "known@example.com");
    const params = { id: project.id };
    const invite = (email: string) => call(membersRoute.POST, { method: "POST", headers: OWNER, params, body: { email, role: "approver" } });
    const a = await invite("Known@Example.com");
    const b = await invite("unknown-person@example.com");
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(a.json).toEqual({ invitation: { email: "known@example.com", role: "approver", status: "pending" } });
    expect(b.json).toEqual({ invitation: { email: "unknown-person@example.com", role: "approver", status: "pending" } });
    expect(Object.keys(a.json.invitation)).toEqual(Object.keys(b.json.invitation));
    // Nobody became a member without consenting.
    expect((await call(projectRoute.GET, { headers: known.headers, params })).status).toBe(404);
    const pending = await call(projectInvitationsRoute.GET, { headers: OWNER, params });
    expect(pending.json.invitations.map((i: { email: string }) => i.email).sort()).toEqual(["known@example.com", "unknown-person@example.com"]);
    // Only owners see them.
    expect((await call(projectInvitationsRoute.GET, { headers: known.headers, params })).status).toBe(404);
  });

  it("the invitee accepts → member with the invited role; someone else cannot accept it; declining and revoking end it", async () => {
    const project = await createProject({ name: "invites 2", ownerId: await ownerId(), repository: { type: "local", path: makeRepo() } });
    const params = { id: project.id };
    const invitee = await makeUser("Invitee", "invitee-2@example.com");
    await call(membersRoute.POST, { method: "POST", headers: OWNER, params, body: { email: "invitee-2@example.com", role: "approver" } });
    const mine = await call(myInvitationsRoute.GET, { headers: invitee.headers });
    expect(mine.json.invitations).toEqual([expect.objectContaining({ projectId: project.id, projectName: "invites 2", role: "approver" })]);
    const invitationId = mine.json.invitations[0].id as string;

    // Not the invitee (even an owner of the project): 404, and it stays pending.
    expect((await call(acceptRoute.POST, { method: "POST", headers: mallory.headers, params: { id: invitationId } })).status).toBe(404);
    expect((await call(acceptRoute.POST, { method: "POST", headers: OWNER, params: { id: invitationId } })).status).toBe(404);

    const accepted = await call(acceptRoute.POST, { method: "POST", headers: invitee.headers, params: { id: invitationId } });
    expect(accepted.status).toBe(200);
    expect(accepted.json.invitation).toEqual({ projectId: project.id, role: "approver", status: "accepted" });
    const members = await call(membersRoute.GET, { headers: OWNER, params });
    expect(members.json.members).toEqual(expect.arrayContaining([expect.objectContaining({ userId: invitee.id, role: "approver" })]));
    expect((await call(acceptRoute.POST, { method: "POST", headers: invitee.headers, params: { id: invitationId } })).status).toBe(404);

    // Declined: no membership.
    const decliner = await makeUser("Decliner", "decliner@example.com");
    await call(membersRoute.POST, { method: "POST", headers: OWNER, params, body: { email: "decliner@example.com", role: "viewer" } });
    const theirs = (await call(myInvitationsRoute.GET, { headers: decliner.headers })).json.invitations[0].id;
    expect((await call(declineRoute.POST, { method: "POST", headers: decliner.headers, params: { id: theirs } })).json.invitation.status).toBe("declined");
    expect((await call(acceptRoute.POST, { method: "POST", headers: decliner.headers, params: { id: theirs } })).status).toBe(404);
    expect((await call(membersRoute.GET, { headers: OWNER, params })).json.members.map((m: { userId: string }) => m.userId)).not.toContain(decliner.id);

    // Revoked by the owner before it is accepted.
    const late = await makeUser("Late", "late@example.com");
    await call(membersRoute.POST, { method: "POST", headers: OWNER, params, body: { email: "late@example.com", role: "viewer" } });
    const lateId = (await call(myInvitationsRoute.GET, { headers: late.headers })).json.invitations[0].id;
    expect((await call(projectInvitationRoute.DELETE, { method: "DELETE", headers: OWNER, params: { id: project.id, invitationId: lateId } })).status).toBe(204);
    expect((await call(myInvitationsRoute.GET, { headers: late.headers })).json.invitations).toEqual([]);
    expect((await call(acceptRoute.POST, { method: "POST", headers: late.headers, params: { id: lateId } })).status).toBe(404);
  });

  it("an invitation for an email with no account yet is accepted after that person signs in", async () => {
    const project = await createProject({ name: "invites 3", ownerId: await ownerId(), repository: { type: "local", path: makeRepo() } });
    await call(membersRoute.POST, { method: "POST", headers: OWNER, params: { id: project.id }, body: { email: "newcomer-3@example.com", role: "viewer" } });
    // First sign-in creates the user (as Auth.js does for GitHub / OIDC).
    const newcomer = await makeUser("Newcomer", "Newcomer-3@example.com");
    const [invitation] = (await call(myInvitationsRoute.GET, { headers: newcomer.headers })).json.invitations;
    expect(invitation).toMatchObject({ projectId: project.id, role: "viewer" });
    expect((await call(acceptRoute.POST, { method: "POST", headers: newcomer.headers, params: { id: invitation.id } })).status).toBe(200);
    expect((await call(projectRoute.GET, { headers: newcomer.headers, params: { id: project.id } })).json.project.role).toBe("viewer");
  });
});

async function ownerId() {
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  return (await ensureLocalOwner()).id;
}
