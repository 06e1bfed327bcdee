import { beforeAll, describe, expect, it } from "vitest";
import { bearer, call, makeWorld, type Result, type World } from "./fixtures";
import { loadCases, MUTATIONS, PUBLIC_ROUTES, sampleBodies, target, type RouteCase } from "./routes";

/*
 * The authorization matrix. Every route handler under app/ is found on disk and imported, so a new route is covered
 * (or fails here) without anyone editing this file — unless it is public (then it must be on the allowlist, with the
 * reason) or its body / parameters are new (then the failure says what to add).
 */

/** Routes about the caller's own things, not a project's: any signed-in user may call them. */
const USER_SCOPED = new Set([
  "GET /api/projects",
  "POST /api/projects",
  "GET /api/runs",
  "GET /api/tokens",
  "POST /api/tokens",
  "DELETE /api/tokens/[id]",
  "POST /api/mermaid/validate",
  // Takes run ids; answers only for runs the caller may see (the leak check below proves it for a stranger).
  "GET /api/run-costs",
  // Instance-wide figures for administrators only (403 for everyone else, see tests/ops/metrics.test.ts).
  "GET /api/metrics",
  // The GitHub App's installation repositories, offered when connecting a project (which any signed-in user may create).
  "GET /api/github/repositories",
  // The caller's own invitations; someone else's id answers 404 (no project data), see tests/auth/tenancy.test.ts.
  "GET /api/invitations",
  "POST /api/invitations/[id]/accept",
  "POST /api/invitations/[id]/decline",
  // The caller's own inbox: only items of projects where they may decide (tests/api/inbox.test.ts proves the scoping).
  "GET /api/inbox",
  "GET /api/inbox/stream",
  // The caller's own notification channels (their email, their Telegram chat); nobody else's can be named.
  "GET /api/me/notifications",
  "PUT /api/me/notifications/[channel]",
  "DELETE /api/me/notifications/[channel]",
  // The caller's own chat accounts (linking codes); someone else's link id answers 404 (tests/chat/link.test.ts).
  "GET /api/me/chat-links",
  "POST /api/me/chat-links",
  "DELETE /api/me/chat-links/[id]",
]);

/**
 * User-scoped routes that need an instance administrator: binding a local path (tests/auth/tenancy.test.ts
 * proves who may bind what) and the instance-wide metrics. Anyone else gets 403.
 */
const ADMIN_ONLY_SAMPLES = new Set(["POST /api/projects", "GET /api/metrics"]);

type Action = "read" | "decide" | "manage";

/**
 * What a handler needs on the project: members management and notification channels are the owner's; other reads are a
 * viewer's; other writes an approver's.
 */
function actionFor(method: string, pattern: string): Action {
  if (pattern.includes("/members") || pattern.startsWith("/api/projects/[id]/invitations")) return "manage";
  if (pattern === "/api/projects/[id]" && MUTATIONS.has(method)) return "manage";
  // Notification channels hold the project's secrets (tokens, SMTP password) and addresses: owners only, reads too.
  if (pattern.startsWith("/api/projects/[id]/notifications") || pattern.startsWith("/api/projects/[id]/deliveries")) return "manage";
  // A project's MCP servers run as its implementers' tools and hold header secrets: owners only, reads too (#38).
  if (pattern.startsWith("/api/projects/[id]/mcp-servers")) return "manage";
  return MUTATIONS.has(method) ? "decide" : "read";
}

let cases: RouteCase[] = [];
let world: World;

beforeAll(async () => {
  world = await makeWorld();
  cases = await loadCases();
});

function send(c: RouteCase, w: World, headers: Record<string, string>, body?: unknown): Promise<Result> {
  const t = target(c, w);
  return call(c.handler as never, { method: c.method, path: t.path, params: t.params, headers, body });
}

const guardedCases = () => cases.filter((c) => !(c.file in PUBLIC_ROUTES));

/** The first sample body that gets past parsing, found by asking as a viewer (who can never change anything). */
async function validBody(c: RouteCase, w: World, as: { headers: Record<string, string> }): Promise<{ body: unknown; result: Result }> {
  if (!MUTATIONS.has(c.method)) return { body: undefined, result: await send(c, w, as.headers) };
  let last: Result | undefined;
  for (const body of sampleBodies(c.key, w)) {
    last = await send(c, w, as.headers, body);
    if (last.status !== 400) return { body, result: last };
  }
  throw new Error(
    `${c.key}: every sample body was refused with 400 (${JSON.stringify(last?.json)}); add a valid one to sampleBodies()`,
  );
}

describe("route discovery", () => {
  it("finds the API routes, including the decision endpoints", () => {
    const keys = cases.map((c) => c.key);
    expect(keys).toEqual(expect.arrayContaining(["POST /api/runs", "GET /api/runs/[id]", "POST /api/tokens", "GET /api/projects/[id]/members"]));
    expect(cases.length).toBeGreaterThanOrEqual(12);
  });

  it("every handler is wrapped by the guard, except allowlisted public routes", () => {
    const unguarded = cases.filter((c) => c.handler.guarded !== true && !(c.file in PUBLIC_ROUTES)).map((c) => c.key);
    expect(unguarded, "these handlers are not wrapped with route() from lib/http.ts").toEqual([]);
    const publicButGuarded = cases.filter((c) => c.file in PUBLIC_ROUTES && c.handler.guarded === true).map((c) => c.key);
    expect(publicButGuarded, "allowlisted as public but guarded: remove them from PUBLIC_ROUTES").toEqual([]);
  });

  it("every project-independent route is declared user-scoped", () => {
    const undeclared = guardedCases()
      .filter((c) => !target(c, world).projectScoped && !USER_SCOPED.has(c.key) && c.key !== "POST /api/runs")
      .map((c) => c.key);
    expect(undeclared, "routes without a project parameter: add them to USER_SCOPED or give them a project check").toEqual([]);
  });
});

describe("authorization matrix", () => {
  it("no credentials → 401 on every guarded handler", async () => {
    for (const c of guardedCases()) {
      const res = await send(c, world, {}, MUTATIONS.has(c.method) ? {} : undefined);
      expect(res.status, c.key).toBe(401);
      expect(res.json?.error?.code, c.key).toBe("unauthorized:auth");
    }
  });

  it("a revoked, unknown or malformed token → 401 on every guarded handler", async () => {
    for (const c of guardedCases()) {
      for (const headers of [bearer(world.revokedToken), bearer("gh_pat_not-a-real-token-000000000000"), { authorization: "Basic abc" }]) {
        const res = await send(c, world, headers, MUTATIONS.has(c.method) ? {} : undefined);
        expect(res.status, `${c.key} with ${headers.authorization.slice(0, 12)}…`).toBe(401);
      }
    }
  });

  it("a non-member → 404 on every project route, and sees none of the project's data anywhere", async () => {
    for (const c of guardedCases()) {
      const { body } = await validBody(c, world, world.viewer);
      const res = await send(c, world, world.stranger.headers, body);
      if (target(c, world).projectScoped || c.key === "POST /api/runs") {
        expect(res.status, c.key).toBe(404);
      }
      const text = JSON.stringify(res.json ?? "");
      expect(text.includes(world.runId), `${c.key} leaks the run`).toBe(false);
      expect(text.includes(world.project.id), `${c.key} leaks the project`).toBe(false);
    }
  });

  it("a viewer → 403 on every project mutation and on members management; reads allowed", async () => {
    for (const c of guardedCases()) {
      const projectRoute = target(c, world).projectScoped || c.key === "POST /api/runs";
      if (!projectRoute) continue;
      const { result } = await validBody(c, world, world.viewer);
      if (actionFor(c.method, c.pattern) === "read") {
        expect([401, 403, 404], `${c.key} should be readable by a viewer (got ${result.status})`).not.toContain(result.status);
      } else {
        expect(result.status, `${c.key}: ${JSON.stringify(result.json)}`).toBe(403);
        expect(result.json.error.code, c.key).toBe("forbidden:auth");
      }
    }
  });

  it("an approver → allowed on every run and clarification action (never 401/403/404); 403 on members management", async () => {
    for (const c of guardedCases()) {
      const projectRoute = target(c, world).projectScoped || c.key === "POST /api/runs";
      if (!projectRoute) continue;
      const { body } = await validBody(c, world, world.viewer);
      const res = await send(c, world, world.approver.headers, body);
      if (actionFor(c.method, c.pattern) === "manage") {
        expect(res.status, c.key).toBe(403);
      } else {
        expect([401, 403, 404], `${c.key} refused an approver: ${res.status} ${JSON.stringify(res.json)}`).not.toContain(res.status);
        expect(res.status, `${c.key}: ${JSON.stringify(res.json)}`).toBeLessThan(500);
      }
    }
  });

  it("the project owner → allowed on members management", async () => {
    for (const c of guardedCases().filter((c) => actionFor(c.method, c.pattern) === "manage")) {
      // The target is a viewer member before each call, so add/change/remove each have something to act on.
      await world.setMember(world.target, "viewer");
      const { body } = await validBody(c, world, world.viewer);
      const res = await send(c, world, world.owner.headers, body);
      expect([401, 403, 404], `${c.key}: ${res.status} ${JSON.stringify(res.json)}`).not.toContain(res.status);
    }
  });

  it("any signed-in user may use the user-scoped routes", async () => {
    for (const c of guardedCases().filter((c) => USER_SCOPED.has(c.key))) {
      const { body } = await validBody(c, world, world.stranger);
      const res = await send(c, world, world.stranger.headers, body);
      if (ADMIN_ONLY_SAMPLES.has(c.key)) expect(res.status, c.key).toBe(403);
      else expect([401, 403], c.key).not.toContain(res.status);
    }
  });

  it("an oversized body → 413 on every mutation that reads one, before anything is done", async () => {
    const huge = { padding: "x".repeat(1_100_000) };
    for (const c of guardedCases().filter((c) => MUTATIONS.has(c.method))) {
      const { body } = await validBody(c, world, world.viewer);
      if (body === undefined && c.method === "DELETE") continue;
      const res = await send(c, world, world.approver.headers, huge);
      expect(res.status, c.key).toBe(413);
    }
  });
});
