import { describe, expect, it, vi } from "vitest";
import { git, useWorkflowHarness } from "./harness";
import { replanWhileLaneRuns } from "./parallel-fixtures";

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
    const { run, repo, approved, branches } = await replanWhileLaneRuns(h.user, "refs/replan-race-test/go");
    // The order this test is about happened: T2's lane decided while T1's re-plan was still being closed.
    expect(seen.heldUntilDecided).toBe(true);
    // Round 1 began T1 and T2 only: T2's lane stopped at its boundary, the plan having changed.
    expect(branches.filter((b) => b.round === 1).map((b) => b.taskId).sort()).toEqual(["T1", "T2"]);
    const t4 = branches.find((b) => b.taskId === "T4")!;
    expect(t4.round).toBeGreaterThan(1);
    expect(t4.sequence).toBeGreaterThan(approved);
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(git(repo, "show", `${run.branch}:delta.txt`)).toBe("T4: Write delta");
  });
});
