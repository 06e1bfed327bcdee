import { inngest } from "../client";
import { decisionAnnounced } from "../events";
import { decisionKey, decisionSettled } from "@/lib/runs/gates/acks";
import { slotWakeSettled } from "@/lib/runs/steps/start";

/**
 * When a stored decision's announcement is repeated, if the workflow has not acknowledged it yet. The workflow waits
 * as "check the stored decision, then waitForEvent"; on Inngest a wait matches only events sent after it was stored,
 * so an announcement landing between the check and the wait is not seen by it. The first repeat comes a second later,
 * when the wait exists; the later ones cover a workflow that was slow to reach its wait (a queue, a retry). After the
 * last one the workflow's own recheck (6 h) remains the safety net.
 */
export const REANNOUNCE_AFTER = ["1s", "3s", "10s", "30s", "2m", "10m", "1h"] as const;

export const decisionReannounce = inngest.createFunction(
  {
    id: "run-decision-reannounce",
    name: "Run: repeat a decision's announcement until the workflow takes it",
    triggers: [decisionAnnounced],
    retries: 3,
  },
  async ({ event, step }) => {
    const { runId, key, announcement } = event.data;
    for (const [i, delay] of REANNOUNCE_AFTER.entries()) {
      await step.sleep(`sleep:${i}`, delay);
      const settled = await step.run(`settled:${i}`, () => {
        const slotUser = decisionKey.slotUser(key);
        return slotUser !== null ? slotWakeSettled({ userId: slotUser }) : decisionSettled({ runId, key });
      });
      if (settled) return { settled: true, repeats: i };
      // The same announcement again: the workflow's wait matches it by name and data.runId, like the first.
      await step.sendEvent(`repeat:${i}`, announcement as Parameters<typeof inngest.send>[0] & object);
    }
    return { settled: false, repeats: REANNOUNCE_AFTER.length };
  },
);
