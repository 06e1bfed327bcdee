import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import type { PlanDocument } from "@/lib/workflow";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { expectRunConsistent, fileBlock, git, launch, newProject, startWorkflowHarness, until, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/**
 * A re-plan proposed from inside a parallel task (limits.maxConcurrentTasks) reaches the plan gate as a single
 * session's does, and the approved plan is the run's: the other tasks of the round work on meanwhile, and the rounds
 * go on with the new plan.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

type Ev = { type: string; payload: unknown; sequence: number };
const taskOf = (e: Ev) => (e.payload as { taskId?: string }).taskId;

describe("re-plan from a parallel task", () => {
  it("a task's re-plan proposal goes to the plan gate while the other task finishes; approved, the new plan's tasks run and merge", { timeout: 240_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // The demo plans T1 (a.txt) and T2 (b.txt) side by side, then the note (T3); T1's session proposes the re-plan.
    const request = ["Two files [replan: The repository keeps a changelog that the plan forgot.]", "", fileBlock("a.txt", "alpha"), "", fileBlock("b.txt", "beta")].join("\n");
    const run = await launch(h.user, project.id, request, { trustMode: { planning: "auto", fixes: "manual" }, limits: { maxConcurrentTasks: 3 } });

    await waitForStatus(run.id, ["awaiting_approval", "completed", "failed"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({
      version: 2,
      replan: expect.stringContaining("Re-plan proposed by the implementer (in task T1). Observation: The repository keeps a changelog that the plan forgot."),
    });
    expect((gate.context as { plan: PlanDocument }).plan.tasks.map((t) => t.id)).toEqual(["T1", "T2", "T3", "R1"]);
    // The other task of the round works on to its end while the gate waits.
    await until(async () => ((await listEvents({ runId: run.id, limit: 1000 })) as Ev[]).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2"), "T2 to finish while the plan gate waits", 120_000);

    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 180_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as Ev[];

    const plans = events.filter((e) => e.type === "PLAN_CREATED").map((e) => e.payload as { version: number; feedback: string | null });
    expect(plans.map((p) => p.version)).toEqual([1, 2]);
    expect(plans[1]!.feedback).toMatch(/^Re-plan proposed by the implementer \(in task T1\)/);
    // Not the fix gate: the only gate is the plan gate.
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind?: string }).kind ?? "plan")).toEqual(["plan"]);
    // T2 merged in the first round; T1 ran again under the new plan (its first session ended at the re-plan,
    // unmerged), and the new plan's task R1 ran and merged too. Every task completed once.
    const merged = events.filter((e) => e.type === "TASK_MERGED").map(taskOf);
    expect(merged[0]).toBe("T2");
    expect([...merged].sort()).toEqual(["R1", "T1", "T2", "T3"]);
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map(taskOf).sort()).toEqual(["R1", "T1", "T2", "T3"]);
    const t1 = events.filter((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T1").map((e) => (e.payload as { run: number }).run);
    expect(t1).toEqual([1, 2]);
    expect(git(repo, "show", `${run.branch}:a.txt`)).toBe("alpha");
    expect(git(repo, "show", `${run.branch}:b.txt`)).toBe("beta");
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });
});
