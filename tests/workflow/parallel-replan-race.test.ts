import { describe, expect, it, vi } from "vitest";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { autoPlanning, git, launch, newProject, tasksRequest, until, useWorkflowHarness, waitForPendingGate } from "./harness";
import { eventsOf, expectCompleted, heldUntilRef, seqOf } from "./parallel-fixtures";

/**
 * A re-plan approved while another lane's task runs: that lane must take no further task of the old plan. Its decision
 * (the step between its tasks, lib/runs/steps/lanes.ts nextInLane) used to read only what the workflow had taken in —
 * the proposing task's re-plan returns to the rounds only after its own closing step — so a lane that reached its
 * boundary first began a task of the old plan (seen once under load in parallel-lanes.test.ts). Here the proposing
 * task's closing step is held until the other lane has decided, which makes that order certain: the decision must
 * read the approval where it is stored.
 */

const seen = vi.hoisted(() => ({ decided: new Set<string>(), heldUntilDecided: false }));
vi.mock("@/lib/runs/steps/lanes", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/lanes")>();
  return {
    ...original,
    nextInLane: async (input: Parameters<typeof original.nextInLane>[0]) => {
      try {
        return await original.nextInLane(input);
      } finally {
        seen.decided.add(input.previousTaskId);
      }
    },
  };
});
vi.mock("@/lib/runs/steps/replan", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/replan")>();
  return {
    ...original,
    // The re-plan's closing step waits (at most a minute) until the lane of T2 has decided about its next task.
    closeReplan: async (input: Parameters<typeof original.closeReplan>[0]) => {
      const until = Date.now() + 60_000;
      while (!seen.decided.has("T2") && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      seen.heldUntilDecided ||= seen.decided.has("T2");
      return original.closeReplan(input);
    },
  };
});

const h = useWorkflowHarness();

describe("a re-plan approved while another lane's task runs", () => {
  it("that lane begins no task of the old plan, though the proposing task has not closed its re-plan yet", { timeout: 240_000 }, async () => {
    // Lanes [T1, T3] and [T2, T4]. T1's session proposes a re-plan at once; T2's command waits until it is approved.
    const go = "refs/replan-race-test/go";
    const tasks = [
      "# Re-plan race",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      `  [run: ${heldUntilRef(go, "beta.txt", 150)}]`,
      "- [ ] T3: Write gamma",
      "  Files: gamma.txt",
      "- [ ] T4: Write delta",
      "  Files: delta.txt",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const request = tasksRequest("Re-plan race [replan: The repository keeps a changelog that the plan forgot.]", tasks);
    const run = await launch(h.user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 2, maxReplans: 1 } });
    const gate = await waitForPendingGate(run.id, 120_000);
    expect(gate.kind).toBe("plan");
    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "APPROVAL_GRANTED"), "the re-plan's approval", 120_000);
    git(repo, "update-ref", go, "HEAD");

    const events = await expectCompleted(run.id, 180_000);
    // The order this test is about happened: T2's lane decided while T1's re-plan was still being closed.
    expect(seen.heldUntilDecided).toBe(true);
    const approved = events.find((e) => e.type === "APPROVAL_GRANTED" && e.sequence > seqOf(events, "TASK_BRANCH_CREATED", "T2"))!.sequence;
    const branches = events
      .filter((e) => e.type === "TASK_BRANCH_CREATED")
      .map((e) => ({ ...(e.payload as { taskId: string; round: number }), sequence: e.sequence }));
    // Round 1 began T1 and T2 only: T2's lane stopped at its boundary, the plan having changed.
    expect(branches.filter((b) => b.round === 1).map((b) => b.taskId).sort()).toEqual(["T1", "T2"]);
    const t4 = branches.find((b) => b.taskId === "T4")!;
    expect(t4.round).toBeGreaterThan(1);
    expect(t4.sequence).toBeGreaterThan(approved);
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(git(repo, "show", `${run.branch}:delta.txt`)).toBe("T4: Write delta");
  });
});
