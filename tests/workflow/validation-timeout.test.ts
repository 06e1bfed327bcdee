import { expect, it } from "vitest";
import { resumeRun } from "@/lib/runs/gates/decide-run";
import { workflowClock } from "@/lib/runs/steps/context";
import { runResumed } from "@/inngest/events";
import { expectRunConsistent, launch, newProject, waitForStatus, waitForWorkflow } from "./harness";
import { type Reply, useScriptedWorkflow } from "./model-server";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

const t = useScriptedWorkflow();

// One reply fits both validator calls (the review and the alignment score).
const PASSING_REVIEW: Reply = { text: JSON.stringify({ passed: true, alignmentScore: 10, rationale: "fits", findings: [], feedback: "" }) };

it("a validation that runs over timeoutMinutes.validation pauses with reason timeout; extend validates again and completes", async () => {
  const { project } = await newProject(t.h.user);
  let release!: (reply: Reply) => void;
  let arrived!: () => void;
  const seen = new Promise<void>((r) => (arrived = r));
  let first = true;
  t.model.respond(() => {
    if (!first) return PASSING_REVIEW;
    first = false;
    arrived();
    return new Promise<Reply>((r) => (release = r));
  });
  const run = await launch(t.h.user, project.id, "Validate slowly", {
    trustMode: { planning: "auto" },
    timeoutMinutes: { validation: 1 },
    modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "openai-compatible:scripted" },
  });
  await seen;
  // The reviewer answers only after the workflow's clock moved past the validation deadline.
  workflowClock.now = () => Date.now() + 2 * 60_000;
  release(PASSING_REVIEW);
  const paused = await waitForStatus(run.id, ["paused", "completed", "failed"]);
  expect(paused.status).toBe("paused");
  expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "validation" });

  const resumed = await resumeRun({ user: t.h.user, runId: run.id, action: "extend" });
  await announceDecision({ event: runResumed.create({ runId: run.id, action: "extend" }), key: decisionKey.resume(resumed.lastSequence) });
  expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
  await waitForWorkflow(run.id);
  const events = await expectRunConsistent(run.id);
  expect(events.filter((e) => e.type === "VALIDATION_PASSED")).toHaveLength(1);
  expect(events.filter((e) => e.type === "RUN_PAUSED").map((e) => (e.payload as { reason: string }).reason)).toEqual(["timeout"]);
});
