import { afterEach, beforeAll, describe, expect, it } from "vitest";
import * as runsRoute from "@/app/api/runs/route";
import * as tokensRoute from "@/app/api/tokens/route";
import * as tokenRoute from "@/app/api/tokens/[id]/route";
import * as membersRoute from "@/app/api/projects/[id]/members/route";
import * as memberRoute from "@/app/api/projects/[id]/members/[userId]/route";
import * as myInvitationsRoute from "@/app/api/invitations/route";
import * as acceptRoute from "@/app/api/invitations/[id]/accept/route";
import { getDb } from "@/lib/db";
import { apiTokens } from "@/lib/db/schema";
import { resetEnvCache } from "@/lib/env";
import { sha256 } from "@/lib/auth/secret";
import { resetRateLimits } from "@/lib/security/rate-limit";
import { bearer, call, makeUser, makeWorld, ORIGIN, sessionCookie, type World } from "./fixtures";

let world: World;

beforeAll(async () => {
  world = await makeWorld();
});

describe("cross-site requests with a session cookie", () => {
  const post = (cookie: string, origin?: string) =>
    call(runsRoute.POST, {
      method: "POST",
      path: "/api/runs",
      headers: { cookie, ...(origin ? { origin } : {}) },
      body: { projectId: world.project.id, request: "from a cookie" },
    });

  it("accepts the cookie for reads and same-origin writes", async () => {
    const cookie = await sessionCookie(world.approver.id);
    const list = await call(runsRoute.GET, { path: "/api/runs", headers: { cookie } });
    expect(list.status).toBe(200);
    expect(list.json.runs.map((r: { id: string }) => r.id)).toContain(world.runId);
    const created = await post(cookie, ORIGIN);
    expect(created.status).toBe(201);
  });

  it("refuses a POST from another site, or with no Origin at all, with 403", async () => {
    const cookie = await sessionCookie(world.approver.id);
    for (const origin of ["https://evil.example", "http://127.0.0.1:3001", undefined]) {
      const res = await post(cookie, origin);
      expect(res.status, String(origin)).toBe(403);
      expect(res.json.error.message).toMatch(/Cross-site request refused/);
    }
  });

  it("a forged or foreign-secret cookie is not a session (401)", async () => {
    const cookie = (await sessionCookie(world.approver.id)).replace(/.{8}$/, "AAAAAAAA");
    expect((await call(runsRoute.GET, { headers: { cookie } })).status).toBe(401);
  });
});

describe("rate limits", () => {
  afterEach(() => {
    delete process.env.GATEHOUSE_RATE_LIMIT_RUNS;
    resetEnvCache();
    resetRateLimits();
  });

  it("answers 429 with Retry-After once a user has used up their run budget, without affecting others", async () => {
    process.env.GATEHOUSE_RATE_LIMIT_RUNS = "2";
    resetEnvCache();
    resetRateLimits();
    const create = (headers: Record<string, string>) =>
      call(runsRoute.POST, { method: "POST", headers, body: { projectId: world.project.id, request: "rate limited" } });
    expect((await create(world.approver.headers)).status).toBe(201);
    expect((await create(world.approver.headers)).status).toBe(201);
    const limited = await create(world.approver.headers);
    expect(limited.status).toBe(429);
    expect(limited.json.error.code).toBe("rate_limited:api");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await create(world.owner.headers)).status).toBe(201);
  });
});

describe("API tokens", () => {
  it("are shown once, stored only as a hash, listed without the value, and stop working when revoked", async () => {
    const user = await makeUser("Scripter");
    const created = await call(tokensRoute.POST, { method: "POST", headers: user.headers, body: { name: "ci" } });
    expect(created.status).toBe(201);
    const token = created.json.token as string;
    // A prefix that names Gatehouse, not one that reads as a GitHub token (gh_pat_).
    expect(token).toMatch(/^gatehouse_api_[A-Za-z0-9_-]{32}$/);

    const db = await getDb();
    const rows = await db.select().from(apiTokens);
    expect(JSON.stringify(rows)).not.toContain(token);
    expect(rows.some((r) => r.tokenHash === sha256(token))).toBe(true);

    const list = await call(tokensRoute.GET, { headers: bearer(token) });
    expect(list.status).toBe(200);
    expect(list.json.tokens.map((t: { name: string }) => t.name)).toEqual(expect.arrayContaining(["ci"]));
    expect(JSON.stringify(list.json)).not.toContain(token);

    // Someone else cannot revoke it: 404, as if it did not exist.
    const foreign = await call(tokenRoute.DELETE, { method: "DELETE", headers: world.stranger.headers, params: { id: created.json.id } });
    expect(foreign.status).toBe(404);

    const revoked = await call(tokenRoute.DELETE, { method: "DELETE", headers: bearer(token), params: { id: created.json.id } });
    expect(revoked.status).toBe(204);
    expect((await call(tokensRoute.GET, { headers: bearer(token) })).status).toBe(401);
  });

  it("a token made before the prefix changed (gh_pat_…) keeps working", async () => {
    const user = await makeUser("Old scripter");
    const old = `gh_pat_${"o".repeat(32)}`;
    const db = await getDb();
    await db.insert(apiTokens).values({ id: "tok_legacy_prefix", userId: user.id, name: "old", tokenHash: sha256(old), prefix: old.slice(0, 12) });
    const list = await call(tokensRoute.GET, { headers: bearer(old) });
    expect(list.status).toBe(200);
    expect(list.json.tokens.map((t: { name: string }) => t.name)).toContain("old");
  });

  it("refuses a token without a name with a 400 naming the field", async () => {
    const res = await call(tokensRoute.POST, { method: "POST", headers: world.viewer.headers, body: {} });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(/name/);
  });
});

describe("project members", () => {
  it("an owner invites a signed-in user by email, who accepts; the owner changes the role and removes them; the user sees the project only meanwhile", async () => {
    const newcomer = await makeUser("Newcomer", "newcomer@example.com");
    const runsSeen = async () =>
      ((await call(runsRoute.GET, { headers: newcomer.headers })).json.runs as Array<{ id: string }>).map((r) => r.id);
    expect(await runsSeen()).toEqual([]);

    const params = { id: world.project.id };
    const added = await call(membersRoute.POST, {
      method: "POST",
      headers: world.owner.headers,
      params,
      body: { email: "NEWCOMER@example.com", role: "viewer" },
    });
    expect(added.status).toBe(202);
    expect(added.json.invitation).toEqual({ email: "newcomer@example.com", role: "viewer", status: "pending" });
    // Nothing until they accept.
    expect(await runsSeen()).toEqual([]);
    const mine = await call(myInvitationsRoute.GET, { headers: newcomer.headers });
    expect(mine.json.invitations).toEqual([expect.objectContaining({ projectId: world.project.id, role: "viewer" })]);
    const accepted = await call(acceptRoute.POST, { method: "POST", headers: newcomer.headers, params: { id: mine.json.invitations[0].id } });
    expect(accepted.status).toBe(200);
    expect(await runsSeen()).toContain(world.runId);

    const again = await call(membersRoute.POST, { method: "POST", headers: world.owner.headers, params, body: { email: "newcomer@example.com", role: "viewer" } });
    expect(again.status).toBe(409);

    const promoted = await call(memberRoute.PATCH, {
      method: "PATCH",
      headers: world.owner.headers,
      params: { ...params, userId: newcomer.id },
      body: { role: "approver" },
    });
    expect(promoted.json.member.role).toBe("approver");

    const list = await call(membersRoute.GET, { headers: world.owner.headers, params });
    expect(list.json.members).toEqual(expect.arrayContaining([expect.objectContaining({ userId: newcomer.id, role: "approver" })]));

    const removed = await call(memberRoute.DELETE, { method: "DELETE", headers: world.owner.headers, params: { ...params, userId: newcomer.id } });
    expect(removed.status).toBe(204);
    expect(await runsSeen()).toEqual([]);
  });

  it("refuses to remove or demote the last owner", async () => {
    const params = { id: world.project.id };

    const demote = await call(memberRoute.PATCH, {
      method: "PATCH",
      headers: world.owner.headers,
      params: { ...params, userId: world.owner.id },
      body: { role: "viewer" },
    });
    expect(demote.status).toBe(409);
    const remove = await call(memberRoute.DELETE, { method: "DELETE", headers: world.owner.headers, params: { ...params, userId: world.owner.id } });
    expect(remove.status).toBe(409);
  });
});
