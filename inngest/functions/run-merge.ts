import { inngest } from "../client";
import { mergeDecided } from "../events";
import { mergeByDecision } from "@/lib/runs/steps/deliver";

/** A person decided to merge a completed run (POST /api/runs/:id/merge): make the merge, or record why it failed. */
export const runMerge = inngest.createFunction(
  { id: "run-merge", name: "Run: merge by a person's decision", triggers: [mergeDecided], retries: 3, concurrency: { limit: 1, key: "event.data.runId" } },
  async ({ event, step }) => step.run("merge", () => mergeByDecision({ runId: event.data.runId })),
);
