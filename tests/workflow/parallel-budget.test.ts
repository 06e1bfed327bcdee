import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { listEvents } from "@/lib/db/event-store";
import { budgetDecisionSchema, decideBudget } from "@/lib/runs/gates/decide-budget";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { launch, newProject, tasksRequest, until, useWorkflowHarness, waitForPendingGate } from "./harness";
import { expectCompleted, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, item 4: "Budgets and costs add up over tasks." The implementation budget is the stage's, whichever task
 * spends it: when two parallel tasks cross it together, one crossing is one budget gate — the task that meets the other
 * task's open budget gate waits for its decision and checks again against the raised budget (it opens a gate of its
 * own only if it is still over). Through the real workflow on the embedded executor, in strict cloud mode.
 */

const h = useWorkflowHarness();

describe("the implementation budget with parallel tasks", () => {
  it("two tasks over the budget at once open one budget gate; raised there, both go on and the run completes with no second gate", { timeout: 240_000 }, async () => {
    const tasks = ["# Budget in lanes", "- [ ] T1: Write alpha", "  Files: alpha.txt", "- [ ] T2: Write beta", "  Files: beta.txt", ""].join("\n");
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Budget lanes", tasks), {
      trustMode: { planning: "auto", fixes: "auto" },
      limits: { maxConcurrentTasks: 2 },
      budgets: { implementation: { tokens: 1 } },
    });
    const gate = await waitForPendingGate(run.id, 120_000);
    expect(gate.kind).toBe("budget");
    // Both tasks have spent (each over the budget of 1 token) before a person decides: the other task meets the open gate.
    const db = await getDb();
    await until(
      async () => new Set((await db.select({ key: modelCalls.stepKey }).from(modelCalls).where(eq(modelCalls.workflowRunId, run.id))).map((r) => /task:(T\d)/.exec(r.key ?? "")?.[1])).size >= 2,
      "both tasks' first model calls",
      120_000,
    );
    await decideBudget({ user: h.user, runId: run.id, input: budgetDecisionSchema.parse({ gateId: gate.id, action: "raise", tokens: 1_000_000 }) });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "raise" }), key: decisionKey.gate(gate.id) });
    const events = await expectCompleted(run.id, 180_000);
    const budgetGates = events.filter((e) => e.type === "APPROVAL_REQUESTED" && (e.payload as { kind: string }).kind === "budget");
    expect(budgetGates).toHaveLength(1);
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map(taskOf).sort()).toEqual(["T1", "T2"]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
    // Both tasks spent over the first budget: the raise covered the stage's spend, not one task's.
    const spent = await db.select({ key: modelCalls.stepKey, tokensIn: modelCalls.tokensIn, tokensOut: modelCalls.tokensOut }).from(modelCalls).where(eq(modelCalls.workflowRunId, run.id));
    for (const id of ["T1", "T2"]) expect(spent.filter((r) => r.key?.includes(`task:${id}:`)).reduce((n, r) => n + r.tokensIn + r.tokensOut, 0)).toBeGreaterThan(1);
    expect((await listEvents({ runId: run.id, limit: 1000 })).some((e) => e.type === "RUN_PAUSED")).toBe(false);
  });
});
