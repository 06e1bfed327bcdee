import { log } from "@/lib/log";

/*
 * The one hook through which a run's end or pause is told to people (run notices: lib/notifications/run-notices.ts,
 * sent by the notify-run Inngest function). The steps call emitRunNotice right after their event is stored; the
 * Inngest layer sets `send` (inngest/functions/notify-run.ts). A notice that cannot be sent is logged: it never fails
 * or holds up the run. A step that runs again sends the same key, which plans no second delivery.
 */

export type RunNoticeKind = "completed" | "failed" | "paused";
/** `gateId`: a run stopped at a budget gate (its budget spent), told as a pause with the gate's ways on. */
export type RunNotice = { runId: string; kind: RunNoticeKind; key: string; gateId?: string };

export const runNoticeHook: { send?: (notice: RunNotice) => Promise<void> } = {};

export async function emitRunNotice(notice: RunNotice): Promise<void> {
  try {
    await runNoticeHook.send?.(notice);
  } catch (error) {
    log.warn("could not send a run notice", { ...notice, error: error instanceof Error ? error.message : String(error) });
  }
}
