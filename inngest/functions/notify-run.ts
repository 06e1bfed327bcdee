import { inngest } from "../client";
import { runNotice } from "../events";
import { deliver, NOTIFY_RETRIES } from "../notify";
import { planRunNotice } from "@/lib/notifications/run-notices";
import { runNoticeHook } from "@/lib/runs/steps/notices";

/** A run completed, failed or paused: told on every channel that takes it, each delivery in its own step (../notify). */
export const notifyRun = inngest.createFunction(
  {
    id: "notify-run",
    name: "Tell the project's channels a run completed, failed or paused",
    triggers: [runNotice],
    retries: NOTIFY_RETRIES,
  },
  async ({ event, step }) => {
    const { runId, kind, key, gateId } = event.data;
    // Keyed by the notice itself: the same notice sent twice (a step run again) plans the same deliveries.
    const planned = await step.run("plan", () => planRunNotice({ runId, kind, gateId, dispatchKey: `run-notice:${runId}:${kind}:${key}` }));
    const outcomes = await Promise.all(planned.map((d) => deliver(step, d.id, d.id)));
    return { deliveries: planned.map((d, i) => ({ ...d, status: outcomes[i] })) };
  },
);

/**
 * The steps' hook (emitRunNotice, called inside a step) sends the notice event. Its id is the run, kind and step key:
 * a step that runs again sends the same id, which Inngest takes once (and which plans the same deliveries).
 */
runNoticeHook.send = async (notice) => {
  await inngest.send(runNotice.create(notice, { id: `run-notice:${notice.runId}:${notice.kind}:${notice.key}` }));
};
