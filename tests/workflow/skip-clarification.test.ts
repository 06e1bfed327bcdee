import { describe, expect, it } from "vitest";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { POST as skipRoute } from "@/app/api/clarifications/[id]/skip/route";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { decisionKey } from "@/lib/runs/gates/acks";
import { expectRunConsistent, git, launch, newProject, until, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

const h = useWorkflowHarness();

async function skip(clarificationId: string, body?: Record<string, unknown>) {
  const response = await skipRoute(
    new Request(`http://127.0.0.1:3000/api/clarifications/${clarificationId}/skip`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    }),
    { params: Promise.resolve({ id: clarificationId }) },
  );
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function pendingQuestion(runId: string) {
  const db = await getDb();
  return until(async () => (await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, runId))).find((c) => c.status === "pending"), "a question");
}

describe("skipping a clarification: proceed with your best judgement", () => {
  it("the implementer gets the skip as its answer, notes it, and the run completes; a second skip is a 409", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    const first = await skip(question.id);
    expect(first.status).toBe(200);
    expect((await skip(question.id)).status).toBe(409);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    const events = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(events).toContain("CLARIFICATION_IGNORED");
    expect(events).not.toContain("CLARIFICATION_ANSWERED");
    // The demo implementer records the answer it got in its note: here, the instruction to use its judgement.
    const note = git(repo, "show", `${run.branch}:docs/requests/greeting.md`);
    expect(note).toMatch(/\*\*Which language\?\*\* — The person chose not to answer\. Proceed with your best judgement/);
  });

  it("a planning question skipped: the planner plans with its best judgement", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[plan-ask: Which greeting?]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    expect((await skip(question.id)).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    expect((await expectRunConsistent(run.id)).map((e) => e.type)).toContain("CLARIFICATION_IGNORED");
  });
});

describe("skipping a clarification: send the run back to planning with the question (ignored)", () => {
  it("the planner re-plans with the implementer's question, the new plan passes the plan gate (planning: auto), and the implementer is told", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    expect(question.stage).toBe("implementation");
    // Not a value the API knows: a 400 naming the field, and the question stays open.
    expect((await skip(question.id, { then: "later" })).status).toBe(400);
    const sent = await skip(question.id, { then: "planning" });
    expect(sent.status).toBe(200);
    expect(sent.body.clarification).toMatchObject({ status: "ignored" });

    const gate = await waitForPendingGate(run.id, 120_000);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({ version: 2, replan: "A person sent the run back to planning with the implementer's question: Which language?" });
    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(events.find((e) => e.type === "CLARIFICATION_IGNORED")!.payload).toMatchObject({ clarificationId: question.id, then: "planning" });
    const plans = events.filter((e) => e.type === "PLAN_CREATED").map((e) => e.payload as { version: number; feedback: string | null });
    expect(plans.map((p) => p.version)).toEqual([1, 2]);
    expect(plans[1]!.feedback).toContain("Which language?");
    // The gate's decision is the question's answer: the implementer heard that the question went back to planning.
    const note = git(repo, "show", `${run.branch}:docs/requests/greeting.md`);
    expect(note).toMatch(/\*\*Which language\?\*\* — A person sent this question back to planning instead of answering it, and the new plan/);
    // The run's record says which way the question was skipped.
    const context = JSON.parse(git(repo, "show", `${run.branch}:.autonomous/runs/${run.id}/context.json`)) as { decisions: Array<{ kind: string; decision: string }> };
    expect(context.decisions).toContainEqual(expect.objectContaining({ kind: "clarification", decision: "skipped (sent back to planning)" }));
  });

  it("a planning question cannot be sent back to planning: a 400 saying what to do, and the question stays open", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[plan-ask: Which greeting?]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    const refused = await skip(question.id, { then: "planning" });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain("asked while planning");
    expect((await skip(question.id, { then: "proceed" })).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
  });
});
