import { inngest } from "../client";
import { runCancelled } from "../events";
import { slotFreedEvents } from "../slots";
import { cleanUpCancelled } from "@/lib/runs/steps/end";

/**
 * A cancellation stops the run's function between or during steps, so nothing inside it cleans up: this drops the
 * run's sandbox, writes its records on the branch and frees its slot of the user's concurrency limit.
 */
export const runCancelledCleanup = inngest.createFunction(
  { id: "run-cancelled-cleanup", name: "Run: clean up after a cancellation", triggers: [runCancelled], retries: 3 },
  async ({ event, step }) => {
    const done = await step.run("clean-up", () => cleanUpCancelled({ runId: event.data.runId }));
    if (done.userId) await step.sendEvent("free-slot", slotFreedEvents({ runId: event.data.runId, userId: done.userId }));
    return done;
  },
);
