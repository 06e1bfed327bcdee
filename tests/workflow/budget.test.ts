import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { listEvents } from "@/lib/db/queries/runs";
import { budgetDecisionSchema, decideBudget } from "@/lib/runs/budget";
import { inngest } from "@/inngest";
import { announceDecision } from "@/inngest/announce";
import { approveGate, cancelRun } from "@/lib/runs/decisions";
import { gateDecided, runCancelled } from "@/inngest/events";
import { decisionKey } from "@/lib/runs/decision-acks";
import { expectRunConsistent, launch, newProject, startWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/** budgets.implementation: crossing it opens a budget gate; raise it, or finish the task then stop. Never a failure. */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

const config = (budget: Record<string, number>) => ({ trustMode: { planning: "auto", fixes: "auto" }, budgets: { implementation: budget } });

async function decide(runId: string, input: Record<string, unknown>) {
  const gate = await waitForPendingGate(runId);
  expect(gate.kind).toBe("budget");
  await decideBudget({ user: h.user, runId, input: budgetDecisionSchema.parse({ gateId: gate.id, ...input }) });
  // As POST /api/runs/:id/budget does: announced until the workflow acknowledges it (strict cloud mode has no look-back).
  await announceDecision({ event: gateDecided.create({ runId, gateId: gate.id, decision: String(input.action) }), key: decisionKey.gate(gate.id) });
  return gate;
}

describe("implementation budget", () => {
  it("over its token budget the run waits at a budget gate that says by how much; raised, it goes on and completes", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Spend some tokens", config({ tokens: 1 }));
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await decide(run.id, { action: "raise", tokens: 1_000_000 });
    expect(gate.context).toMatchObject({ stage: "implementation", metric: "tokens", limit: 1, reason: expect.stringMatching(/used \d+ tokens, over its budget of 1/) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind)).toEqual(["budget"]);
    const [row] = await (await getDb()).select().from(gates).where(eq(gates.id, gate.id));
    expect(row).toMatchObject({ decision: "raise", notes: "raised by 1000000 tokens" });
  });

  it("'finish the task, then stop': the task in progress is finished, nothing else starts, and the unfinished rest goes to a person (no automatic fix)", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    // Two tasks: T1 writes a.txt, T2 the request's note. The budget is crossed during T1.
    const run = await launch(h.user, project.id, "Two notes\n```file:a.txt\na\n```", config({ costUsd: 0.000001, tokens: 1 }));
    await waitForStatus(run.id, ["awaiting_approval"]);
    await decide(run.id, { action: "finish_task" });
    // Validation fails on T2, which never started; even with fixes on "auto" that goes to a person, not a new attempt.
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("awaiting_fix_decision");
    const events = await listEvents({ runId: run.id });
    const requested = events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind);
    // One budget gate only: after "finish, then stop" no further budget check runs in this attempt.
    expect(requested.filter((k) => k === "budget")).toHaveLength(1);
    expect(events.filter((e) => e.type === "TASK_STARTED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1"]);
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1"]);
    expect(events.filter((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation")).toHaveLength(1);
    expect(events.some((e) => e.type === "VALIDATION_FAILED")).toBe(true);
    expect(events.some((e) => e.type === "RUN_FAILED")).toBe(false);
    await cancelRun({ user: h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
    await waitForWorkflow(run.id);
  });

  it("cancel at a budget gate ends the run as cancelled, never failed", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Spend and stop", config({ tokens: 1 }));
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("budget");
    // Approve or reject would choose neither way on: refused, pointing at the budget endpoint.
    await expect(approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } })).rejects.toThrow(/POST \/api\/runs\/:id\/budget/);
    await cancelRun({ user: h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    expect((await waitForStatus(run.id, ["cancelled", "failed"])).status).toBe("cancelled");
    await waitForWorkflow(run.id);
    const events = (await listEvents({ runId: run.id })).map((e) => e.type);
    expect(events).not.toContain("RUN_FAILED");
    expect(events.at(-1)).toBe("RUN_CANCELLED");
  });

  it("refuses a raise without an amount, or an unknown action, with a message that says what to send", () => {
    expect(budgetDecisionSchema.safeParse({ action: "raise" }).error?.issues[0]?.message).toMatch(/raise needs tokens or costUsd/);
    expect(budgetDecisionSchema.safeParse({ action: "cancel" }).error?.issues[0]?.message).toMatch(/POST \/api\/runs\/:id\/cancel/);
    expect(budgetDecisionSchema.safeParse({ action: "raise", tokens: -5 }).success).toBe(false);
  });
});
