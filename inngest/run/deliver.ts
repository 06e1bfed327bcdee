import { deliver as deliverLocally, complete } from "@/lib/runs/steps/deliver";
import { deliverGitHub } from "@/lib/runs/steps/github";
import { startStage } from "@/lib/runs/steps/start";
import { slotFreedEvents } from "../slots";
import type { RunFlow } from "./flow";
import { gate, githubStep, honourPauseRequest } from "./waits";

/*
 * Deliver: the records, memory and code on the run branch — pushed with a pull request on GitHub (marked ready,
 * merged when the config allows), or squash-merged locally (a conflict goes to a person) — then the run completes
 * and frees its slot.
 */
export async function deliver(flow: RunFlow) {
  const { runId, runStep, run, config, step } = flow;
  await honourPauseRequest(flow, "delivery", "delivery");
  await runStep("delivery:start", () => startStage({ runId, stage: "delivery", stepKey: "delivery:start" }));
  if (run.github) {
    await githubStep(flow, "deliver:github", "delivery", (key) => deliverGitHub({ runId, stepKey: key }));
  } else {
    for (let i = 0; ; i++) {
      const delivered = await runStep(`deliver:${i}`, () => deliverLocally({ runId, stepKey: `deliver:${i}`, merge: config.git.autoMerge }));
      if (delivered.merge !== "conflict") break;
      const decision = await gate(flow, `conflict-gate:${i}`, "conflict", { files: delivered.files, reason: delivered.reason });
      if (decision.decision !== "approve") break;
    }
  }
  const done = await runStep("complete", () => complete({ runId, stepKey: "complete" }));
  await step.sendEvent("free-slot", slotFreedEvents({ runId, userId: done.userId }));
}
