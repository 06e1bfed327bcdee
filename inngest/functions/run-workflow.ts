import { inngest } from "../client";
import { runCancelled, runStarted } from "../events";
import { slotFreedEvents } from "../slots";
import { loadFlow } from "../run/flow";
import { githubStep, waitForSlot } from "../run/waits";
import { planUntilApproved } from "../run/plan";
import { implement, reviewImplementation, triage } from "../run/implement";
import { decideFix, validate } from "../run/validate";
import { decideStuck } from "../run/stuck";
import { deliver } from "../run/deliver";
import { RunEndedError } from "@/lib/runs/steps/context";
import { finishUnsuccessfully } from "@/lib/runs/steps/end";
import { syncGitHub } from "@/lib/runs/steps/github";
import { createBranch } from "@/lib/runs/steps/start";
import { log } from "@/lib/log";

/**
 * One coding request: plan → (gate) → implement → validate → deliver, as one durable function. Every side effect runs
 * inside a step (lib/runs/steps/), so a crash never repeats a finished one; code between steps only decides what to do
 * next from memoized results, which keeps it deterministic on every replay. The stages are in ../run/ (one module
 * each), and the waits for slots and people in ../run/waits.ts.
 */
export const runWorkflow = inngest.createFunction(
  {
    id: "run-workflow",
    name: "Run: plan → gate → implement → validate → deliver",
    triggers: [runStarted],
    idempotency: "event.data.runId",
    cancelOn: [{ event: runCancelled, match: "data.runId" }],
    retries: 3,
    onFailure: async ({ event, error, step }) => {
      const runId = (event.data.event.data as { runId: string }).runId;
      const done = await step.run("record-failure", () => finishUnsuccessfully({ runId, reason: error.message, stepKey: "failure" }));
      if (done.userId) await step.sendEvent("free-slot", slotFreedEvents({ runId, userId: done.userId }));
    },
  },
  async ({ event, step }) => {
    const runId = event.data.runId;
    const flow = await loadFlow({ runId, step });
    const { run, runStep, config } = flow;
    try {
      if (run.status === "completed" || run.status === "failed" || run.status === "cancelled") return { status: run.status };

      // ---- Start: per-user concurrency (queued until a slot frees up), then the run branch
      await waitForSlot(flow, "slot");
      if (run.github) await githubStep(flow, "github:sync", null, () => syncGitHub({ runId }));
      const { branch } = await runStep("branch", () => createBranch({ runId }));

      // ---- Plan → plan gate, until a plan is approved
      const plans = await planUntilApproved(flow);

      // ---- Implement → validate, with fixes
      const triaged = await triage(flow, plans, branch);
      let fixFeedback: string | null = null;
      for (let attempt = 1; ; attempt++) {
        const implemented = await implement(flow, plans, { attempt, feedback: fixFeedback, skip: triaged.skip });
        if (!implemented.failure && config.trustMode.implementation === "manual") {
          const review = await reviewImplementation(flow, attempt, implemented.state);
          if (!review.approved) {
            fixFeedback = review.feedback;
            continue;
          }
        }
        const verdict = implemented.failure ? null : await validate(flow, plans, attempt);
        if (verdict?.passed) break;
        // An implementer that stopped (after a nudge and a firm reminder) goes to a person: retry with a note, re-plan, cancel.
        const fix = implemented.failure
          ? await decideStuck(flow, plans, { attempt, failure: implemented.failure, state: implemented.state })
          : await decideFix(flow, { attempt, verdict, failure: null, budgetStopped: implemented.budgetStopped });
        if (fix.accepted) break;
        fixFeedback = fix.feedback;
      }

      // ---- Deliver
      await deliver(flow);
      return { status: "completed" };
    } catch (error) {
      if (error instanceof RunEndedError) {
        log.info("run ended; its workflow stops", { runId, status: error.status });
        return { status: error.status };
      }
      throw error;
    }
  },
);
