import { beforeAll, describe, expect, it } from "vitest";
import * as projectsRoute from "@/app/api/projects/route";
import * as projectRoute from "@/app/api/projects/[id]/route";
import * as runsRoute from "@/app/api/runs/route";
import * as cancelRoute from "@/app/api/runs/[id]/cancel/route";
import * as streamRoute from "@/app/api/runs/[id]/stream/route";
import * as modelCallsRoute from "@/app/api/runs/[id]/model-calls/route";
import * as validateRoute from "@/app/api/mermaid/validate/route";
import * as costsRoute from "@/app/api/run-costs/route";
import { write } from "@/lib/db";
import { modelCalls, users } from "@/lib/db/schema";
import { appendEventsTx } from "@/lib/db/event-store";
import { createApiToken } from "@/lib/auth/tokens";
import { newId } from "@/lib/ids";
import { ADMIN, ORIGIN, call, makeRepo } from "./helpers";

let projectId: string;
let stranger: Record<string, string>;

beforeAll(async () => {
  const res = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body: { name: "dash", repository: { type: "local", path: makeRepo() } } });
  projectId = res.json.project.id;
  await write(async (tx) => {
    await tx.insert(users).values({ id: "usr_dash_stranger", name: "Stranger" }).onConflictDoNothing();
  });
  const { token } = await createApiToken({ userId: "usr_dash_stranger", name: "t" });
  stranger = { authorization: `Bearer ${token}` };
});

async function newRun(request = "stream me") {
  const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request } });
  return res.json.run.id as string;
}

async function openStream(runId: string, headers: Record<string, string> = ADMIN, query = "") {
  const response = await streamRoute.GET(new Request(`${ORIGIN}/api/runs/${runId}/stream${query}`, { headers }), {
    params: Promise.resolve({ id: runId }),
  });
  return response;
}

describe("GET /api/runs/:id/stream", () => {
  it("streams the event log as SSE with id = sequence and ends when the run is terminal", async () => {
    const runId = await newRun();
    await write((tx) => appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage: "planning" } }]));
    expect((await call(cancelRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } })).status).toBe(200);

    const response = await openStream(runId);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const text = await response.text();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids[0]).toBe(1);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(text).toContain('"type":"RUN_CANCELLED"');
    expect(text).toMatch(/event: end\ndata: \{"status":"cancelled"/);
  });

  it("resumes after Last-Event-ID, sending only later events", async () => {
    const runId = await newRun();
    await write((tx) => appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }]));
    await call(cancelRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    const text = await (await openStream(runId, { ...ADMIN, "last-event-id": "2" })).text();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids.length).toBeGreaterThan(0);
    expect(Math.min(...ids)).toBe(3);
  });

  it("is 404 for someone else's run and 401 without sign-in", async () => {
    const runId = await newRun();
    expect((await openStream(runId, stranger)).status).toBe(404);
    expect((await openStream(runId, {})).status).toBe(401);
  });
});

describe("POST /api/mermaid/validate", () => {
  it("accepts a valid flowchart and names the line of an invalid one", async () => {
    const ok = await call(validateRoute.POST, { method: "POST", headers: ADMIN, body: { source: "flowchart TD\n  A[Start] --> B[Done]" } });
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ valid: true, kind: "flowchart" });
    const bad = await call(validateRoute.POST, { method: "POST", headers: ADMIN, body: { source: "flowchart TD\n  A[Start] --> \n  B[[[" } });
    expect(bad.status).toBe(200);
    expect(bad.json.valid).toBe(false);
    expect(bad.json.error.message).toMatch(/Invalid Mermaid/);
  });

  it("requires sign-in and a source", async () => {
    expect((await call(validateRoute.POST, { method: "POST", body: { source: "flowchart TD" } })).status).toBe(401);
    expect((await call(validateRoute.POST, { method: "POST", headers: ADMIN, body: {} })).status).toBe(400);
  });
});

describe("run cost and model calls", () => {
  it("sums model calls per run for visible runs only", async () => {
    const runId = await newRun("costly");
    const other = await newRun("free");
    await write(async (tx) => {
      await tx.insert(modelCalls).values([
        { id: newId("mc"), workflowRunId: runId, stage: "planning", model: "demo:default", tokensIn: 100, tokensOut: 50, costUsd: 0.01, status: "ok" },
        { id: newId("mc"), workflowRunId: runId, stage: "implementation", model: "demo:default", tokensIn: 10, tokensOut: 5, costUsd: 0.02, status: "ok" },
      ]);
    });
    const res = await call(costsRoute.GET, { headers: ADMIN, path: `/api/run-costs?ids=${runId},${other}` });
    expect(res.status).toBe(200);
    expect(res.json.costs[runId]).toMatchObject({ tokensIn: 110, tokensOut: 55, calls: 2 });
    expect(res.json.costs[runId].usd).toBeCloseTo(0.03);
    expect(res.json.costs[other]).toEqual({ usd: 0, tokensIn: 0, tokensOut: 0, calls: 0 });
    const hidden = await call(costsRoute.GET, { headers: stranger, path: `/api/run-costs?ids=${runId}` });
    expect(hidden.json.costs).toEqual({});

    const calls = await call(modelCallsRoute.GET, { headers: ADMIN, params: { id: runId } });
    expect(calls.json.modelCalls.map((c: { stage: string }) => c.stage).sort()).toEqual(["implementation", "planning"]);
    expect((await call(modelCallsRoute.GET, { headers: stranger, params: { id: runId } })).status).toBe(404);
  });
});

describe("PATCH /api/projects/:id", () => {
  it("saves a valid default config and refuses an invalid one naming the field", async () => {
    const ok = await call(projectRoute.PATCH, {
      method: "PATCH",
      headers: ADMIN,
      params: { id: projectId },
      body: { name: "dash renamed", defaultConfig: { trustMode: { planning: "auto" }, maxClarifications: 5 } },
    });
    expect(ok.status).toBe(200);
    expect(ok.json.project).toMatchObject({ name: "dash renamed", defaultConfig: { trustMode: { planning: "auto" }, maxClarifications: 5 } });
    const bad = await call(projectRoute.PATCH, { method: "PATCH", headers: ADMIN, params: { id: projectId }, body: { defaultConfig: { maxClarifications: 99 } } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("maxClarifications");
    const got = await call(projectRoute.GET, { headers: ADMIN, params: { id: projectId } });
    expect(got.json.project.defaultConfig.maxClarifications).toBe(5);
  });

  it("is 404 for a non-member", async () => {
    expect((await call(projectRoute.PATCH, { method: "PATCH", headers: stranger, params: { id: projectId }, body: { name: "x" } })).status).toBe(404);
  });
});
