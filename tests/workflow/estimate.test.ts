import { describe, expect, it } from "vitest";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { GET as runRoute } from "@/app/api/runs/[id]/route";
import type { EstimateReport, RunEstimate } from "@/lib/runs/estimate-model";
import { expectRunConsistent, fileBlock, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/** Issue 18: an estimate shown on the plan card (kept with the gate), and compared with the actuals after the run. */

const h = useWorkflowHarness();

const auth = { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` };

async function approve(runId: string, gateId: string) {
  const response = await approveRoute(
    new Request(`http://127.0.0.1:3000/api/runs/${runId}/approve`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ gateId }) }),
    { params: Promise.resolve({ id: runId }) },
  );
  expect(response.status).toBe(200);
}

/** GET /api/runs/:id through the real handler: what the dashboard reads. */
async function detail(runId: string) {
  const response = await runRoute(new Request(`http://127.0.0.1:3000/api/runs/${runId}`, { headers: auth }), { params: Promise.resolve({ id: runId }) });
  expect(response.status).toBe(200);
  return (await response.json()) as { estimate: EstimateReport | null; gates: Array<{ id: string; context: { estimate?: RunEstimate } }> };
}

async function runThroughGate(projectId: string, request: string) {
  const run = await launch(h.user, projectId, request, { trustMode: { planning: "manual" } });
  await waitForStatus(run.id, ["awaiting_approval"], 120_000);
  const gate = await waitForPendingGate(run.id);
  const estimate = (gate.context as { estimate?: RunEstimate }).estimate!;
  // While the gate waits, the run's detail carries the same estimate, no actuals yet for the stages ahead.
  const waiting = await detail(run.id);
  expect(waiting.estimate?.estimate).toEqual(estimate);
  expect(waiting.estimate?.stages.map((s) => s.actual)).toEqual([null, null, null]);
  await approve(run.id, gate.id);
  expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
  await waitForWorkflow(run.id);
  await expectRunConsistent(run.id);
  return { run, gate, estimate };
}

describe("the cost estimate on the plan gate", () => {
  it("is made from the price table for a project without history, kept with the gate, and set beside the actuals after the run; the next run learns from the first", { timeout: 240_000 }, async () => {
    const { project } = await newProject(h.user);
    const first = await runThroughGate(project.id, `Add two files\n\n${fileBlock("src/a.txt", "a")}\n\n${fileBlock("src/b.txt", "b")}`);
    expect(first.estimate.basis).toEqual({ kind: "price-table" });
    expect(first.estimate.planVersion).toBe(1);
    expect(first.estimate.tasks).toBe(3);
    expect(first.estimate.planning.wallMs).toBeGreaterThan(0);
    for (const stage of ["implementation", "validation"] as const) {
      const r = first.estimate.stages[stage];
      expect(r.tokens.high).toBeGreaterThan(r.tokens.low);
      expect(r.wallMs.low).toBeGreaterThan(0);
    }

    // After the run: the estimate is unchanged, and every stage has its actual and a verdict beside its range.
    const after = await detail(first.run.id);
    expect(after.gates.find((g) => g.id === first.gate.id)?.context.estimate).toEqual(first.estimate);
    expect(after.estimate?.estimate).toEqual(first.estimate);
    expect(after.estimate?.planning?.wallMs).toBeGreaterThan(0);
    for (const row of after.estimate!.stages) {
      expect(row.actual, row.stage).not.toBeNull();
      expect(row.actual!.wallMs, row.stage).toBeGreaterThan(0);
      for (const metric of ["tokens", "costUsd", "wallMs"] as const) {
        const { low, high } = row.estimate[metric];
        const value = row.actual![metric];
        expect(row.verdict![metric]).toBe(value < low ? "below" : value > high ? "above" : "within");
      }
    }

    // A second run in the same project learns from the first (completed) one.
    const second = await runThroughGate(project.id, `Add one file\n\n${fileBlock("src/c.txt", "c")}`);
    expect(second.estimate.basis).toEqual({ kind: "history", runs: 1 });
    const firstImpl = after.estimate!.stages[0]!.actual!;
    // Scaled from the first run's implementation by plan size, widened: the first run's own time lies inside the range once scaled back.
    const scale = second.estimate.units / first.estimate.units;
    expect(second.estimate.stages.implementation.wallMs.low).toBeLessThanOrEqual(firstImpl.wallMs * scale);
    expect(second.estimate.stages.implementation.wallMs.high).toBeGreaterThanOrEqual(firstImpl.wallMs * scale * 0.99);
  });
});

describe("the cost estimate of a plan approved without a gate", () => {
  it("trustMode.planning auto: the estimate is kept on the run (PLAN_ESTIMATED) and set beside the actuals after the run", { timeout: 180_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Add two files\n\n${fileBlock("src/a.txt", "a")}\n\n${fileBlock("src/b.txt", "b")}`, { trustMode: { planning: "auto" } });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    const estimated = events.filter((e) => e.type === "PLAN_ESTIMATED");
    expect(estimated).toHaveLength(1);
    const kept = (estimated[0]!.payload as { version: number; estimate: RunEstimate }).estimate;
    expect(kept).toMatchObject({ planVersion: 1, basis: { kind: "price-table" } });
    // Made once the plan was recorded, before implementation started.
    const at = events.indexOf(estimated[0]!);
    expect(events.slice(0, at).some((e) => e.type === "PLAN_CREATED")).toBe(true);
    expect(events.slice(0, at).some((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation")).toBe(false);

    const after = await detail(run.id);
    expect(after.gates).toEqual([]);
    expect(after.estimate?.estimate).toEqual(kept);
    for (const row of after.estimate!.stages) {
      expect(row.actual).not.toBeNull();
      expect(row.verdict).not.toBeNull();
    }
  });
});
