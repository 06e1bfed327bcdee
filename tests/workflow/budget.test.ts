import { describe, expect, it } from "vitest";
import { POST as budgetRoute } from "@/app/api/runs/[id]/budget/route";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as rejectRoute } from "@/app/api/runs/[id]/reject/route";
import { getDb } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { listEvents } from "@/lib/db/event-store";
import { describeExcess, describeRaise, NOTHING_SPENT, overBudget } from "@/lib/runs/budget";
import { budgetDecisionSchema, decideBudget } from "@/lib/runs/gates/decide-budget";
import { inngest } from "@/inngest";
import { announceDecision } from "@/inngest/announce";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { gateDecided, runCancelled } from "@/inngest/events";
import { decisionKey } from "@/lib/runs/gates/acks";
import { expectRunConsistent, fileBlock, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { ADMIN, call } from "../api/helpers";

/** budgets.implementation: crossing it opens a budget gate; raise it, or finish the task then stop. Never a failure. */

const h = useWorkflowHarness();

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
    expect(budgetDecisionSchema.safeParse({ action: "raise" }).error?.issues[0]?.message).toMatch(/raise needs tokens, costUsd or minutes/);
    expect(budgetDecisionSchema.safeParse({ action: "cancel" }).error?.issues[0]?.message).toMatch(/POST \/api\/runs\/:id\/cancel/);
    expect(budgetDecisionSchema.safeParse({ action: "raise", tokens: -5 }).success).toBe(false);
    expect(budgetDecisionSchema.safeParse({ action: "raise", minutes: 15 }).data).toMatchObject({ action: "raise", minutes: 15 });
    expect(budgetDecisionSchema.safeParse({ action: "raise", minutes: 0 }).error?.issues[0]?.message).toBe("must be more than 0");
    expect(budgetDecisionSchema.safeParse({ action: "raise", minutes: 20_000 }).error?.issues[0]?.message).toMatch(/at most 10080 minutes/);
  });

  it("a minutes budget is over when the working minutes pass the limit plus what people raised; the reason says it in people's units", () => {
    const spent = { tokens: 0, costUsd: 0, minutes: 12.25 };
    expect(overBudget("implementation", spent, { minutes: 10 }, NOTHING_SPENT)).toEqual({ stage: "implementation", metric: "minutes", used: 12.25, limit: 10 });
    expect(overBudget("implementation", spent, { minutes: 10 }, { ...NOTHING_SPENT, minutes: 5 })).toBeNull();
    expect(describeExcess({ stage: "validation", metric: "minutes", used: 12.25, limit: 10 })).toBe("The validation stage worked 12.3 minutes, over its budget of 10 minutes.");
    expect(describeExcess({ stage: "planning", metric: "minutes", used: 0.75, limit: 0.5 })).toBe("The planning stage worked 45 seconds, over its budget of 30 seconds.");
    expect(describeExcess({ stage: "planning", metric: "minutes", used: 0.025, limit: 0.01 })).toBe("The planning stage worked 1.5 seconds, over its budget of 600 ms.");
    expect(describeRaise({ tokens: 1000, minutes: 1 })).toBe("raised by 1000 tokens and 1 minute");
  });
});

/** POST to a run's route as the admin token does, through the real handler (auth, parsing, decision, announcement). */
async function post(handler: typeof budgetRoute, runId: string, action: string, body: unknown) {
  const r = await call(handler, { method: "POST", path: `/api/runs/${runId}/${action}`, params: { id: runId }, headers: ADMIN, body });
  return { status: r.status, text: JSON.stringify(r.json) };
}

const kinds = async (runId: string) =>
  (await listEvents({ runId })).filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind);

describe("planning and validation budgets, decided through POST /api/runs/:id/budget", () => {
  it("a re-plan over the planning budget waits at a budget gate (no task to finish there); raised, the re-plan goes to the plan gate", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Write a note\n\n${fileBlock("notes/a.txt", "a")}`, {
      trustMode: { planning: "manual", fixes: "auto" },
      budgets: { planning: { tokens: 1 } },
    });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const planGate = await waitForPendingGate(run.id);
    expect(planGate.kind).toBe("plan");
    // The first plan is never gated by the budget (nothing was spent before it); the re-plan after a rejection is.
    expect((await post(rejectRoute, run.id, "reject", { gateId: planGate.id, feedback: "Name the file better" })).status).toBe(200);
    const budgetGate = await waitForPendingGate(run.id);
    expect(budgetGate).toMatchObject({ kind: "budget", context: { stage: "planning", metric: "tokens", limit: 1 } });
    // A plain approve, or "finish the task" (planning has none), is refused with what to send instead; nothing is decided.
    const approved = await post(approveRoute, run.id, "approve", { gateId: budgetGate.id });
    expect(approved.status).toBe(409);
    expect(approved.text).toMatch(/POST \/api\/runs\/:id\/budget/);
    const finish = await post(budgetRoute, run.id, "budget", { gateId: budgetGate.id, action: "finish_task" });
    expect(finish.status).toBe(409);
    expect(finish.text).toMatch(/planning budget has no task in progress/);
    const noAmount = await post(budgetRoute, run.id, "budget", { gateId: budgetGate.id, action: "raise" });
    expect(noAmount.status).toBe(400);
    expect(noAmount.text).toMatch(/raise needs tokens, costUsd or minutes/);
    expect((await post(budgetRoute, run.id, "budget", { gateId: budgetGate.id, action: "raise", tokens: 1_000_000 })).status).toBe(200);

    const second = await waitForPendingGate(run.id);
    expect(second.kind).toBe("plan");
    expect((await post(approveRoute, run.id, "approve", { gateId: second.id })).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    expect(await kinds(run.id)).toEqual(["plan", "budget", "plan"]);
  });

  it("a second validation over the validation budget waits at a budget gate; raised, the run validates and completes", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Write a note [fail-validation: 1]\n\n${fileBlock("notes/a.txt", "a")}`, {
      trustMode: { planning: "auto", fixes: "auto" },
      budgets: { validation: { tokens: 1 } },
    });
    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate).toMatchObject({ kind: "budget", context: { stage: "validation", metric: "tokens" } });
    // The first validation ran (and failed, minor); the fix attempt ran; its validation waits for the raise.
    const before = (await listEvents({ runId: run.id })).map((e) => e.type);
    expect(before.filter((t) => t === "VALIDATION_FAILED")).toHaveLength(1);
    expect(before.filter((t) => t === "VALIDATION_PASSED")).toHaveLength(0);
    expect((await post(budgetRoute, run.id, "budget", { gateId: gate.id, action: "raise", tokens: 1_000_000 })).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    expect(await kinds(run.id)).toEqual(["budget"]);
    expect((await listEvents({ runId: run.id })).some((e) => e.type === "VALIDATION_PASSED")).toBe(true);
  });
});
