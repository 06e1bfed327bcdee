import { describe, expect, it } from "vitest";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import type { PlanDocument } from "@/lib/workflow";
import { gateDecided } from "@/inngest/events";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { expectRunConsistent, git, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/** PAOR through the real workflow: progress recorded per task, and a re-plan after an observation through the plan gate. */

const h = useWorkflowHarness();

describe("reflection and re-planning", () => {
  it("an observation that breaks the plan proposes a re-plan; the new plan passes the plan gate (even with planning: auto) and is implemented", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Add a changelog\n[replan: The repository has no CHANGELOG convention to follow.]", {
      trustMode: { planning: "auto", fixes: "manual" },
    });

    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({ version: 2, replan: expect.stringContaining("Observation: The repository has no CHANGELOG convention to follow.") });
    const proposed = (gate.context as { plan: PlanDocument }).plan;
    expect(proposed.tasks.map((t) => t.id)).toEqual(["T1", "R1"]);
    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    const plans = events.filter((e) => e.type === "PLAN_CREATED").map((e) => e.payload as { version: number; feedback: string | null });
    expect(plans.map((p) => p.version)).toEqual([1, 2]);
    expect(plans[1]!.feedback).toMatch(/^Re-plan proposed by the implementer/);
    // The approved re-plan is what was implemented: its new task R1 finished too, and each task recorded its progress.
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1", "R1"]);
    expect(events.filter((e) => e.type === "TASK_PROGRESS").map((e) => e.payload)).toMatchObject([
      { taskId: "T1", progress: 1, changed: "Wrote docs/requests/add-a-changelog.md." },
      { taskId: "R1", progress: 1, changed: "Nothing to change." },
    ]);
    expect(git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n")).toContain("docs/requests/add-a-changelog.md");
  });

  it("past limits.maxReplans a proposed re-plan is refused without a gate, and the run goes on with the approved plan", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Add a changelog\n[replan: No convention.]", {
      trustMode: { planning: "auto", fixes: "manual" },
      limits: { maxReplans: 0 },
    });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "PLAN_CREATED")).toHaveLength(1);
    expect(events.some((e) => e.type === "APPROVAL_REQUESTED")).toBe(false);
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1"]);
  });
});
