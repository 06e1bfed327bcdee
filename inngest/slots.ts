import { decisionKey } from "@/lib/runs/gates/acks";
import { decisionAnnounced, slotFreed } from "./events";

/*
 * A freed slot of a user's concurrency limit, announced: sent by the run's function (a run ended or waits for a
 * person) and by the cancellation cleanup, and repeated by the re-announcer while one of the user's queued runs could
 * start (its key is the user's, not a decision's: decisionKey.slot).
 */

/** A slot of `userId`'s concurrency limit is free: announce it, and hand it to the re-announcer. */
export function slotFreedEvents({ runId, userId }: { runId: string; userId: string }) {
  const freed = slotFreed.create({ runId, userId });
  return [freed, decisionAnnounced.create({ runId, key: decisionKey.slot(userId), announcement: { name: slotFreed.name, data: freed.data } })];
}
