import { decisionAnnounced, slotFreed } from "./events";

/*
 * A freed slot of a user's concurrency limit, announced: sent by the run's function (a run ended or waits for a
 * person) and by the cancellation cleanup, and repeated by the re-announcer while one of the user's queued runs could
 * start (its key is the user's, not a decision's).
 */

/** The key of a freed slot's wake-up: `slot:<userId>` (see slotFreedEvents). */
const SLOT = "slot:";

/** A slot of `userId`'s concurrency limit is free: announce it, and hand it to the re-announcer. */
export function slotFreedEvents({ runId, userId }: { runId: string; userId: string }) {
  const freed = slotFreed.create({ runId, userId });
  return [freed, decisionAnnounced.create({ runId, key: `${SLOT}${userId}`, announcement: { name: slotFreed.name, data: freed.data } })];
}

/** The user whose freed slot a re-announcer key stands for, or null for a decision's key. */
export function slotKeyUser(key: string): string | null {
  return key.startsWith(SLOT) ? key.slice(SLOT.length) : null;
}
