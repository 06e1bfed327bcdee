import { beforeAll, describe, expect, it } from "vitest";
import { count } from "drizzle-orm";
import * as projectsRoute from "@/app/api/projects/route";
import * as runsRoute from "@/app/api/runs/route";
import * as runRoute from "@/app/api/runs/[id]/route";
import * as eventsRoute from "@/app/api/runs/[id]/events/route";
import * as healthRoute from "@/app/api/health/route";
import * as runGroupRoute from "@/app/api/run-groups/[id]/route";
import { getDb } from "@/lib/db";
import { workflowEvents, workflowRuns } from "@/lib/db/schema";
import { createApiToken, revokeApiToken } from "@/lib/auth/tokens";
import { write } from "@/lib/db";
import { users } from "@/lib/db/schema";
import { ADMIN, call, makeRepo } from "./helpers";

let projectId: string;

async function rowCounts() {
  const db = await getDb();
  const [runs] = await db.select({ n: count() }).from(workflowRuns);
  const [events] = await db.select({ n: count() }).from(workflowEvents);
  return { runs: runs!.n, events: events!.n };
}

beforeAll(async () => {
  const res = await call(projectsRoute.POST, {
    method: "POST",
    headers: ADMIN,
    body: { name: "demo", repository: { type: "local", path: makeRepo() } },
  });
  expect(res.status).toBe(201);
  projectId = res.json.project.id;
});

describe("GET /api/health", () => {
  it("answers {ok} without credentials and reports the database and the execution mode to a signed-in caller", async () => {
    const anonymous = await call(healthRoute.GET);
    expect(anonymous.status).toBe(200);
    expect(anonymous.json).toEqual({ ok: true });
    const res = await call(healthRoute.GET, { headers: ADMIN });
    expect(res.json).toMatchObject({ ok: true, db: { ok: true }, executor: { mode: "embedded" }, version: "0.1.0" });
  });
});

describe("POST /api/runs", () => {
  it("creates a queued run with the resolved config and its first event", async () => {
    const res = await call(runsRoute.POST, {
      method: "POST",
      headers: ADMIN,
      body: { projectId, request: "Add a health page", config: { trustMode: { planning: "auto" }, maxClarifications: 2 } },
    });
    expect(res.status).toBe(201);
    const run = res.json.run;
    expect(run).toMatchObject({ projectId, status: "queued", currentStage: null, originalRequest: "Add a health page" });
    expect(run.branch).toBe(`autonomous/${run.id}-add-a-health-page`);
    expect(run.config).toMatchObject({
      trustMode: { planning: "auto", implementation: "auto", fixes: "auto" },
      maxClarifications: 2,
      modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "demo:default" },
      git: { createPR: true, autoMerge: false, baseBranch: "main" },
    });

    const detail = await call(runRoute.GET, { headers: ADMIN, params: { id: run.id } });
    expect(detail.status).toBe(200);
    expect(detail.json).toMatchObject({ run: { id: run.id }, gates: [], clarifications: [], artifacts: [], cost: { usd: 0 } });

    const events = await call(eventsRoute.GET, { headers: ADMIN, params: { id: run.id }, path: `/api/runs/${run.id}/events?after=0` });
    expect(events.json.events).toEqual([expect.objectContaining({ sequence: 1, type: "RUN_CREATED" })]);
    const none = await call(eventsRoute.GET, { headers: ADMIN, params: { id: run.id }, path: `/api/runs/${run.id}/events?after=1` });
    expect(none.json.events).toEqual([]);
  });

  const bad: Array<[string, { rawBody?: string; body?: unknown }, RegExp]> = [
    ["malformed JSON", { rawBody: "{not json" }, /not valid JSON/],
    ["an empty body", { rawBody: "" }, /body is empty/],
    ["a missing request", { body: { projectId: "x" } }, /request: is required/],
    ["an empty request", { body: { projectId: "x", request: "   " } }, /request: must not be empty/],
    ["an unknown top-level field", { body: { projectId: "x", request: "r", priority: 1 } }, /Unrecognized key.*priority/],
    ["an unknown config key", { body: { request: "r", config: { trustmode: {} } } }, /config\..*trustmode/],
    ["maxClarifications < 0", { body: { request: "r", config: { maxClarifications: -1 } } }, /config\.maxClarifications: must be 0 or more/],
    ["an unknown trust mode", { body: { request: "r", config: { trustMode: { planning: "yolo" } } } }, /config\.trustMode\.planning: must be "auto" or "manual"/],
    ["a bad model id", { body: { request: "r", config: { modelRouting: { planner: "gpt4" } } } }, /config\.modelRouting\.planner: must be a model id/],
    ["a provider without its key", { body: { request: "r", config: { modelRouting: { planner: "openai:gpt-4o" } } } }, /modelRouting\.planner/],
  ];
  it.each(bad)("refuses %s with a 400 naming the field, and writes nothing", async (_name, input, message) => {
    const before = await rowCounts();
    const body = input.body && typeof input.body === "object" && !("projectId" in input.body) ? { projectId, ...input.body } : input.body;
    const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, ...(input.rawBody !== undefined ? { rawBody: input.rawBody } : { body }) });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toMatch(/^bad_request:/);
    expect(res.json.error.message).toMatch(message);
    expect(await rowCounts()).toEqual(before);
  });

  it("refuses a huge body with 413 and writes nothing", async () => {
    const before = await rowCounts();
    const res = await call(runsRoute.POST, {
      method: "POST",
      headers: ADMIN,
      body: { projectId, request: "x".repeat(1_100_000) },
    });
    expect(res.status).toBe(413);
    expect(res.json.error.code).toBe("payload_too_large:api");
    expect(await rowCounts()).toEqual(before);
  });

  it("gives 404 for a project that does not exist", async () => {
    const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId: "prj_nope", request: "r" } });
    expect(res.status).toBe(404);
  });
});

describe("POST /api/runs with approaches (explore N approaches)", () => {
  it("starts N runs of one request under one group id, each told its approach; GET /api/run-groups/:id lists them", async () => {
    const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "Add a cache", approaches: 3 } });
    expect(res.status).toBe(201);
    const { groupId, runs, run } = res.json;
    expect(groupId).toMatch(/^grp_/);
    expect(runs.map((r: { originalRequest: string }) => r.originalRequest)).toEqual([1, 2, 3].map((i) => `Add a cache\n\nApproach ${i} of 3`));
    expect(run.id).toBe(runs[0].id);
    expect(new Set(runs.map((r: { id: string }) => r.id)).size).toBe(3);
    const group = await call(runGroupRoute.GET, { headers: ADMIN, params: { id: groupId } });
    expect(group.status).toBe(200);
    expect(group.json.groupId).toBe(groupId);
    expect(group.json.runs.map((r: { id: string }) => r.id)).toEqual(runs.map((r: { id: string }) => r.id));
    expect((await call(runGroupRoute.GET, { headers: ADMIN, params: { id: "grp_nothing" } })).status).toBe(404);
  });

  it("a note per approach lands in that approach's request; an empty note keeps 'Approach i of N'", async () => {
    const res = await call(runsRoute.POST, {
      method: "POST",
      headers: ADMIN,
      body: { projectId, request: "Parse dates", approaches: 3, approachNotes: ["with a regex", "", "with date-fns"] },
    });
    expect(res.status).toBe(201);
    expect(res.json.runs.map((r: { originalRequest: string }) => r.originalRequest)).toEqual([
      "Parse dates\n\nApproach 1: with a regex",
      "Parse dates\n\nApproach 2 of 3",
      "Parse dates\n\nApproach 3: with date-fns",
    ]);
  });

  it("refuses notes without approaches, more notes than approaches, or a note that is too long, creating nothing", async () => {
    const before = await rowCounts();
    for (const [body, message] of [
      [{ approachNotes: ["a"] }, /^approachNotes: needs approaches/],
      [{ approaches: 2, approachNotes: ["a", "b", "c"] }, /^approachNotes: has 3 notes for 2 approaches/],
      [{ approaches: 2, approachNotes: ["x".repeat(501)] }, /^approachNotes.*500 characters/],
      [{ approaches: 2, approachNotes: "a" }, /^approachNotes: must be a list of texts/],
    ] as const) {
      const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "x", ...body } });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.message).toMatch(message);
    }
    expect(await rowCounts()).toEqual(before);
  });

  it("refuses a bad count or a bad config with a 400 naming the field, and creates none of the runs", async () => {
    const before = await rowCounts();
    for (const [approaches, config] of [[0, undefined], [6, undefined], [2.5, undefined], ["3", undefined], [3, { maxClarifications: -1 }]] as const) {
      const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "x", approaches, ...(config ? { config } : {}) } });
      expect(res.status, JSON.stringify({ approaches, config })).toBe(400);
      expect(res.json.error.message).toMatch(config ? /^config\./ : /^approaches/);
    }
    expect(await rowCounts()).toEqual(before);
  });

  it("shows a group only to those who may see its runs (404 for a stranger)", async () => {
    const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "Private", approaches: 2 } });
    await write(async (tx) => {
      await tx.insert(users).values({ id: "usr_group_stranger", name: "Stranger" }).onConflictDoNothing();
    });
    const { token } = await createApiToken({ userId: "usr_group_stranger", name: "t" });
    const group = await call(runGroupRoute.GET, { headers: { authorization: `Bearer ${token}` }, params: { id: res.json.groupId } });
    expect(group.status).toBe(404);
  });
});

describe("authentication and ownership", () => {
  it("answers 401 without credentials, and with a wrong or revoked token", async () => {
    expect((await call(runsRoute.GET)).status).toBe(401);
    expect((await call(runsRoute.GET, { headers: { authorization: "Bearer wrong-token-value" } })).status).toBe(401);
    expect((await call(projectsRoute.POST, { method: "POST", body: {} })).status).toBe(401);
  });

  it("hides another user's runs as 404 and lists none of them", async () => {
    const created = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "secret work" } });
    await write(async (tx) => {
      await tx.insert(users).values({ id: "usr_stranger", name: "Stranger" }).onConflictDoNothing();
    });
    const { id: tokenId, token } = await createApiToken({ userId: "usr_stranger", name: "t" });
    const stranger = { authorization: `Bearer ${token}` };
    expect((await call(runRoute.GET, { headers: stranger, params: { id: created.json.run.id } })).status).toBe(404);
    expect((await call(eventsRoute.GET, { headers: stranger, params: { id: created.json.run.id } })).status).toBe(404);
    const list = await call(runsRoute.GET, { headers: stranger, path: "/api/runs" });
    expect(list.status).toBe(200);
    expect(list.json.runs).toEqual([]);
    const post = await call(runsRoute.POST, { method: "POST", headers: stranger, body: { projectId, request: "r" } });
    expect(post.status).toBe(404);
    await revokeApiToken({ id: tokenId, userId: "usr_stranger" });
    expect((await call(runsRoute.GET, { headers: stranger })).status).toBe(401);
  });
});

describe("GET /api/runs", () => {
  it("pages with a cursor, newest first, and filters by status", async () => {
    for (let i = 0; i < 5; i++) {
      await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: `page ${i}` } });
    }
    const first = await call(runsRoute.GET, { headers: ADMIN, path: "/api/runs?limit=3" });
    expect(first.json.runs).toHaveLength(3);
    expect(first.json.nextCursor).toEqual(expect.any(String));
    const second = await call(runsRoute.GET, { headers: ADMIN, path: `/api/runs?limit=3&cursor=${first.json.nextCursor}` });
    const ids = [...first.json.runs, ...second.json.runs].map((r: { id: string }) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    const created = [...first.json.runs, ...second.json.runs].map((r: { createdAt: string }) => r.createdAt);
    expect([...created].sort().reverse()).toEqual(created);

    const queued = await call(runsRoute.GET, { headers: ADMIN, path: "/api/runs?status=queued,running" });
    expect(queued.json.runs.every((r: { status: string }) => r.status === "queued")).toBe(true);
    const badStatus = await call(runsRoute.GET, { headers: ADMIN, path: "/api/runs?status=done" });
    expect(badStatus.status).toBe(400);
    const badCursor = await call(runsRoute.GET, { headers: ADMIN, path: "/api/runs?cursor=zzz" });
    expect(badCursor.status).toBe(400);
  });
});

describe("POST /api/projects", () => {
  it.each([
    [{ name: "x", repository: { type: "local", path: "relative/path" } }, /repository.path: must be an absolute path/],
    [{ name: "x", repository: { type: "local", path: "/definitely/not/here" } }, /must be an existing git repository/],
    [{ name: "x", repository: { type: "svn", path: "/x" } }, /repository/],
    [{ repository: { type: "local", path: "/tmp" } }, /name/],
  ])("refuses %j with a 400", async (body, message) => {
    const res = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(message);
  });
});
