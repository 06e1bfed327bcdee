import { performance } from "node:perf_hooks";
import { fmt, percentile, printTable, useTempDatabase } from "./lib";

/**
 * Dashboard reads: the runs list API's service with 10,000 runs (first page, a deep cursor page, a status filter, a
 * search) and the run page's data for a run with 2,000 events (detail + event log + timeline/plan derivation).
 */
export async function run() {
  useTempDatabase("dashboard");
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { write, closeDb } = await import("@/lib/db");
  const { workflowRuns } = await import("@/lib/db/schema");
  const { createProject } = await import("@/lib/projects/queries");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { createRun } = await import("@/lib/db/queries/runs");
  const { appendEvents, getRunState, listEvents } = await import("@/lib/db/event-store");
  const { getRunDetail, listRunsForUser } = await import("@/lib/runs/service");
  const { newId } = await import("@/lib/ids");
  const { describeEvent, planVersions, stageProgress } = await import("@/lib/dashboard/timeline");

  const owner = await ensureLocalOwner();
  const user = { id: owner.id, name: owner.name ?? null, via: "admin-token" as const };
  const project = await createProject({ name: "bench", ownerId: owner.id, repository: { type: "local", path: "/tmp" } });

  // 10,000 runs: one made properly, the rest copies of its projection with their own ids, times and statuses.
  await createRun({ projectId: project.id, userId: owner.id, request: "bench template", config: {} });
  const db = await (await import("@/lib/db")).getDb();
  const [row] = await db.select().from(workflowRuns).limit(1);
  const statuses = ["queued", "running", "awaiting_approval", "completed", "failed"] as const;
  const total = 10_000;
  const base = Date.now() - total * 1000;
  for (let i = 1; i < total; i += 500) {
    const batch = Array.from({ length: Math.min(500, total - i) }, (_, j) => {
      const n = i + j;
      return { ...row!, id: newId("run"), createdAt: new Date(base + n * 1000), updatedAt: new Date(base + n * 1000), status: statuses[n % statuses.length]!, originalRequest: `bench request ${n}${n % 97 === 0 ? " needle" : ""}` };
    });
    await write((tx) => tx.insert(workflowRuns).values(batch));
  }

  const measure = async (label: string, n: number, fn: () => Promise<unknown>) => {
    await fn();
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await fn();
      times.push(performance.now() - t);
    }
    return { measure: label, p50_ms: fmt(percentile(times, 50)), p95_ms: fmt(percentile(times, 95)) };
  };

  // A cursor 100 pages deep.
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) cursor = (await listRunsForUser({ user, limit: 50, cursor })).nextCursor ?? undefined;

  const rows = [
    await measure(`runs list, first page of 50 (${total} runs)`, 100, () => listRunsForUser({ user, limit: 50 })),
    await measure("runs list, page 101 by cursor", 100, () => listRunsForUser({ user, limit: 50, cursor })),
    await measure("runs list, waiting-on-me filter", 100, () =>
      listRunsForUser({ user, limit: 50, status: ["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"] }),
    ),
    await measure("runs list, search", 50, () => listRunsForUser({ user, limit: 50, q: "needle" })),
  ];

  // A run with 2,000 events.
  const big = await createRun({ projectId: project.id, userId: owner.id, request: "bench big run", config: {} });
  await appendEvents(big.id, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage: "implementation" } }]);
  const bigState = await getRunState({ id: big.id });
  for (let i = bigState!.lastSequence; i < 2000; i += 500) {
    await appendEvents(
      big.id,
      Array.from({ length: Math.min(500, 2000 - i) }, (_, j) => ({ type: "ARTIFACT_CREATED" as const, payload: { type: "note", path: `f${i + j}.md` } })),
    );
  }
  rows.push(
    await measure("run page data, 2,000 events (detail + events + timeline)", 50, async () => {
      const [, events] = await Promise.all([getRunDetail({ user, runId: big.id }), listEvents({ runId: big.id, after: 0, limit: 2000 })]);
      const api = events.map((e) => ({ sequence: e.sequence, type: e.type, payload: e.payload as Record<string, unknown>, timestamp: new Date(e.timestamp).toISOString() }));
      api.map((e) => describeEvent(e));
      planVersions(api);
      stageProgress(api);
      if (api.length < 2000) throw new Error(`expected 2000 events, got ${api.length}`);
    }),
  );
  printTable(rows);
  closeDb();
}
