import { expect, it } from "vitest";
import { cancelRun, resumeRun } from "@/lib/runs/gates/decide-run";
import { workflowClock } from "@/lib/runs/steps/context";
import { modelCallsForRun } from "@/lib/dashboard/costs";
import { inngest } from "@/inngest";
import { runCancelled, runResumed } from "@/inngest/events";
import { expectRunConsistent, launch, newProject, waitForStatus, waitForWorkflow } from "./harness";
import { type Reply, useScriptedWorkflow } from "./model-server";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

/*
 * A stage's deadline cuts a hung model call where it is: the planner's and the validator's calls get an abort signal
 * that fires when the workflow clock passes the stage deadline. The scripted model below never answers the first
 * call — the run can only pause because the call was aborted, not because it returned late.
 */

const t = useScriptedWorkflow();

const PASSING: Reply = { text: JSON.stringify({ passed: true, alignmentScore: 10, rationale: "fits", findings: [], feedback: "" }) };
const never = () => new Promise<Reply>(() => {});

it("a planner call that never answers is aborted at the planning deadline and the run pauses for extend or cancel", async () => {
  const { project } = await newProject(t.h.user);
  let arrived!: () => void;
  const seen = new Promise<void>((r) => (arrived = r));
  t.model.respond(() => {
    arrived();
    return never();
  });
  const run = await launch(t.h.user, project.id, "Plan slowly", {
    trustMode: { planning: "auto" },
    timeoutMinutes: { planning: 1 },
    modelRouting: { planner: "openai-compatible:scripted", implementer: "demo:default", validator: "demo:default" },
  });
  await seen;
  workflowClock.now = () => Date.now() + 2 * 60_000;
  const paused = await waitForStatus(run.id, ["paused", "completed", "failed"]);
  expect(paused.status).toBe("paused");
  expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "planning" });
  // The aborted call is recorded as such, and was not retried.
  const calls = await modelCallsForRun({ runId: run.id });
  expect(calls.filter((c) => c.stage === "planning")).toEqual([expect.objectContaining({ status: "error", error: expect.stringMatching(/aborted/) })]);

  await cancelRun({ user: t.h.user, runId: run.id });
  await inngest.send(runCancelled.create({ runId: run.id }));
  expect((await waitForStatus(run.id, ["cancelled"])).status).toBe("cancelled");
  await waitForWorkflow(run.id);
  await expectRunConsistent(run.id);
});

it("a validator call that never answers is aborted at the validation deadline; extend validates again and completes", async () => {
  const { project } = await newProject(t.h.user);
  let arrived!: () => void;
  const seen = new Promise<void>((r) => (arrived = r));
  let first = true;
  t.model.respond(() => {
    if (!first) return PASSING;
    first = false;
    arrived();
    return never();
  });
  const run = await launch(t.h.user, project.id, "Validate, hung", {
    trustMode: { planning: "auto" },
    timeoutMinutes: { validation: 1 },
    modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "openai-compatible:scripted" },
  });
  await seen;
  workflowClock.now = () => Date.now() + 2 * 60_000;
  const paused = await waitForStatus(run.id, ["paused", "completed", "failed"]);
  expect(paused.status).toBe("paused");
  expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "validation" });

  const resumed = await resumeRun({ user: t.h.user, runId: run.id, action: "extend" });
  await announceDecision({ event: runResumed.create({ runId: run.id, action: "extend" }), key: decisionKey.resume(resumed.lastSequence) });
  expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
  await waitForWorkflow(run.id);
  const events = await expectRunConsistent(run.id);
  expect(events.filter((e) => e.type === "VALIDATION_PASSED")).toHaveLength(1);
});
