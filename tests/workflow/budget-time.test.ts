import { expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { approveGate, rejectGate } from "@/lib/runs/gates/decide-gate";
import { budgetDecisionSchema, decideBudget } from "@/lib/runs/gates/decide-budget";
import { workflowClock } from "@/lib/runs/steps/context";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { decisionKey } from "@/lib/runs/gates/acks";
import { expectRunConsistent, launch, newProject, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { scriptedImplementer, useScriptedWorkflow } from "./model-server";

/*
 * Wall time: a stage's working minutes (budgets.<stage>.minutes) open a budget gate like tokens and cost do, and the
 * time people take to decide is never a stage's working time (neither for a minutes budget nor for timeoutMinutes).
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };

it("over its minutes budget the implementation waits at a budget gate in minutes; raised by minutes, it goes on and completes", async () => {
  const { project } = await newProject(t.h.user);
  // The first implementer turn takes at least 1.2 s of real time: over a budget of 0.01 minutes (600 ms).
  const script = scriptedImplementer("docs/requests/work-against-the-clock.md");
  let first = true;
  t.model.respond(async (body) => {
    if (first) {
      first = false;
      await new Promise((r) => setTimeout(r, 1_200));
    }
    return script(body);
  });
  const run = await launch(t.h.user, project.id, "Work against the clock", {
    trustMode: { planning: "auto" },
    budgets: { implementation: { minutes: 0.01 } },
    modelRouting: SCRIPTED,
  });
  await waitForStatus(run.id, ["awaiting_approval", "completed", "failed"]);
  const gate = await waitForPendingGate(run.id);
  expect(gate.kind).toBe("budget");
  expect(gate.context).toMatchObject({ stage: "implementation", metric: "minutes", limit: 0.01, reason: expect.stringMatching(/worked [\d.]+ seconds, over its budget of 600 ms\./) });
  expect((gate.context as { used: number }).used).toBeGreaterThanOrEqual(0.02);

  // Raised by minutes (what the card sends): the run goes on and completes without another budget gate.
  await decideBudget({ user: t.h.user, runId: run.id, input: budgetDecisionSchema.parse({ gateId: gate.id, action: "raise", minutes: 30 }) });
  await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "raise" }), key: decisionKey.gate(gate.id) });
  expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"])).status).toBe("completed");
  await waitForWorkflow(run.id);
  const events = await expectRunConsistent(run.id);
  expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind)).toEqual(["budget"]);
  const [row] = await (await getDb()).select().from(gates).where(eq(gates.id, gate.id));
  expect(row).toMatchObject({ decision: "raise", notes: "raised by 30 minutes", payload: { raise: { tokens: 0, costUsd: 0, minutes: 30 } } });
});

it("a person who takes longer than timeoutMinutes at the plan gate does not time out the re-plan: their time is not planning's", async () => {
  const { project } = await newProject(t.h.user);
  const run = await launch(t.h.user, project.id, "Decide slowly", { timeoutMinutes: { planning: 1 } });
  const first = await waitForPendingGate(run.id);
  expect(first.kind).toBe("plan");
  // The person takes 5 minutes (the workflow's clock) to reject; planning's timeout is 1 minute of working time.
  workflowClock.now = () => Date.now() + 5 * 60_000;
  await rejectGate({ user: t.h.user, runId: run.id, input: { gateId: first.id, feedback: "Name the note after the request." } });
  await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: first.id, decision: "reject" }), key: decisionKey.gate(first.id) });

  // The re-plan runs and comes back to the gate, instead of pausing with "Planning ran over 1 minutes".
  const second = await waitForPendingGate(run.id, 30_000);
  expect(second.id).not.toBe(first.id);
  expect(second.kind).toBe("plan");
  await approveGate({ user: t.h.user, runId: run.id, input: { gateId: second.id } });
  await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: second.id, decision: "approve" }), key: decisionKey.gate(second.id) });
  expect((await waitForStatus(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
  await waitForWorkflow(run.id);
  const events = await expectRunConsistent(run.id);
  expect(events.some((e) => e.type === "RUN_PAUSED")).toBe(false);
  expect(events.filter((e) => e.type === "PLAN_CREATED")).toHaveLength(2);
});
