import { log } from "@/lib/log";
import { inngest } from "./client";

type Sendable = Parameters<typeof inngest.send>[0];

/**
 * Announce something already stored. A failed send is logged, not thrown: the decision is in the database and the
 * workflow's waits re-check it when they time out, so the caller's request still succeeded.
 */
export async function announce(event: Sendable): Promise<boolean> {
  try {
    await inngest.send(event);
    return true;
  } catch (error) {
    log.warn("could not announce event; the workflow will pick the change up from the database", {
      error: error instanceof Error ? error.message : String(error),
    });
    return false;
  }
}
