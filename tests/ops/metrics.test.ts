import { beforeAll, describe, expect, it } from "vitest";
import { write } from "@/lib/db";
import { gates, modelCalls, users } from "@/lib/db/schema";
import { createApiToken } from "@/lib/auth/tokens";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvent } from "@/lib/db/event-store";
import { newId } from "@/lib/ids";
import { GET } from "@/app/api/metrics/route";

const ADMIN = { authorization: "Bearer test-admin-token-0123456789" };

async function scrape(headers: Record<string, string>) {
  const res = await GET(new Request("http://127.0.0.1/api/metrics", { headers }), { params: Promise.resolve({}) } as never);
  return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
}

/** The value of one sample line, e.g. `gatehouse_runs{status="running"}`. */
function sample(text: string, line: string): number | null {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : null;
}

let runId: string;

beforeAll(async () => {
  const owner = await ensureLocalOwner();
  const project = await createProject({ name: "metrics", ownerId: owner.id, repository: { type: "local", path: "/tmp/m" } });
  runId = (await createRun({ projectId: project.id, userId: owner.id, request: "Measure me", config: {} })).id;
  await appendEvent(runId, { type: "RUN_STARTED", payload: {} });
  await createRun({ projectId: project.id, userId: owner.id, request: "Queued", config: {} });
  const now = Date.now();
  await write(async (tx) => {
    await tx.insert(gates).values([
      { id: newId("gate"), workflowRunId: runId, gateNumber: 1, kind: "plan", status: "approved", decidedAt: new Date(now - 60_000), createdAt: new Date(now - 660_000) },
      { id: newId("gate"), workflowRunId: runId, gateNumber: 2, kind: "fix", status: "pending", createdAt: new Date(now - 120_000) },
    ]);
    await tx.insert(modelCalls).values([
      { id: newId("mc"), workflowRunId: runId, stage: "planning", model: "demo:default", tokensIn: 100, tokensOut: 40, costUsd: 0.25, latencyMs: 1500, status: "ok" },
      { id: newId("mc"), workflowRunId: runId, stage: "planning", model: "demo:default", tokensIn: 10, tokensOut: 0, costUsd: 0.05, latencyMs: 300, status: "error" },
    ]);
    await tx.insert(users).values({ id: "usr_metrics_plain", name: "Plain" }).onConflictDoNothing();
  });
});

describe("GET /api/metrics", () => {
  it("answers Prometheus text with the instance's runs, gates and model figures", async () => {
    const { status, type, text } = await scrape(ADMIN);
    expect(status).toBe(200);
    expect(type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sample(text, 'gatehouse_runs{status="running"}')).toBe(1);
    expect(sample(text, 'gatehouse_runs{status="queued"}')).toBe(1);
    expect(sample(text, 'gatehouse_runs{status="completed"}')).toBe(0);
    expect(sample(text, 'gatehouse_gates_pending{kind="fix"}')).toBe(1);
    expect(sample(text, 'gatehouse_gate_oldest_pending_seconds{kind="fix"}')).toBeGreaterThanOrEqual(120);
    // The decided plan gate waited 600 s: in the 900 s bucket, not the 300 s one.
    expect(sample(text, 'gatehouse_gate_wait_seconds_bucket{le="300",kind="plan"}')).toBe(0);
    expect(sample(text, 'gatehouse_gate_wait_seconds_bucket{le="900",kind="plan"}')).toBe(1);
    expect(sample(text, 'gatehouse_gate_wait_seconds_sum{kind="plan"}')).toBe(600);
    expect(sample(text, 'gatehouse_model_calls_total{model="demo:default",stage="planning",status="ok"}')).toBe(1);
    expect(sample(text, 'gatehouse_model_calls_total{model="demo:default",stage="planning",status="error"}')).toBe(1);
    expect(sample(text, 'gatehouse_model_cost_usd_total{model="demo:default",stage="planning"}')).toBeCloseTo(0.3);
    expect(sample(text, 'gatehouse_model_tokens_total{model="demo:default",stage="planning",direction="in"}')).toBe(110);
    expect(sample(text, 'gatehouse_model_call_latency_seconds_count{stage="planning"}')).toBe(2);
    // This process's own metrics come along.
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d+/m);
    // Nothing that identifies a run, a project or a person.
    expect(text).not.toContain(runId);
  });

  it("is for instance administrators only: 401 without credentials, 403 for an ordinary user", async () => {
    expect((await scrape({})).status).toBe(401);
    const { token } = await createApiToken({ userId: "usr_metrics_plain", name: "scraper" });
    const res = await scrape({ authorization: `Bearer ${token}` });
    expect(res.status).toBe(403);
    expect(res.text).toContain("instance administrators");
  });
});
