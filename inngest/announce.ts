import { log } from "@/lib/log";
import { inngest } from "./client";
import { clarificationAnswered, decisionAnnounced, gateDecided, runResumed } from "./events";

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

type DecisionEvent =
  | ReturnType<typeof gateDecided.create>
  | ReturnType<typeof clarificationAnswered.create>
  | ReturnType<typeof runResumed.create>;

/**
 * Announce a stored decision that a waiting run must take (a gate decision, an answer, a resume), and hand it to the
 * re-announcer in the same send: Inngest's waits do not look back, so an announcement that lands between the
 * workflow's check and its wait would be missed; the re-announcer repeats it until the workflow acknowledges `key`
 * (lib/runs/gates/acks.ts, decisionKey). The routes reach it through inngest/decide.ts, one function per decision kind.
 */
export async function announceDecision({ event, key }: { event: DecisionEvent; key: string }): Promise<boolean> {
  const data = event.data as Record<string, unknown> & { runId: string };
  return announce([
    event,
    decisionAnnounced.create({ runId: data.runId, key, announcement: { name: event.name as DecisionEvent["name"], data } }),
  ] as Sendable);
}
