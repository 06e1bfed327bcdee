import { sql } from "drizzle-orm";
import { write } from "@/lib/db";
import { databaseAway, writesRefusedSince } from "@/lib/db/away";
import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";
import { append } from "./context";

/*
 * The database away under a run: locked by another process past SQLite's busy timeout, or unreachable. While it is
 * away nothing can be written — not the run's events, not the executor's record of a step — so the run cannot be
 * paused in the store then. A step that fails on it (databaseAway) does not fail: it returns "the database was away"
 * (inngest/run/flow.ts runStep), which the executor stores only once it can write again (until then it keeps driving
 * the run, and the step runs again from its start: its effects are keyed by the step, so nothing doubles); the flow
 * then waits a few seconds and runs the same work again, for as long as the database stays away.
 *
 * What a person should see afterwards is kept in this process's memory meanwhile (the only place left): when the
 * outage outlasted a step's usual retries, the run's next step, once the database takes writes, records it as a pause
 * (reason `database`, saying when and for how long) that resumed by itself — nothing a person does would have helped,
 * and once anything can be written the cause is gone. A shorter outage is an ordinary retry and leaves no record. If
 * the process itself stops during the outage, the memory goes with it: the run still goes on, without the record.
 */

/** An outage shorter than this is covered by the step's own retries (1 s, 2 s, 4 s … after the 5 s busy timeout). */
export const DATABASE_PATIENCE_MS = 30_000;

/** Whether a step failed because the database refused or could not take the work (not because of the work itself). */
export { databaseAway };

type Outage = { since: number; error: string };
/** Per run: since when its steps have been failing on the database, and how (this process's memory; see above). */
const outages = new Map<string, Outage>();

/**
 * A step of `runId` failed on the database: remember since when — since the first of this process's writes that the
 * database refused began (lib/db/away.ts), not since this step's write failed: writes wait for the lock one after
 * another, so that failure can come many busy timeouts after the database went away.
 */
export function noteDatabaseAway(runId: string, error: unknown, now = Date.now()): void {
  if (outages.has(runId)) return;
  const message = error instanceof Error ? error.message : String(error);
  outages.set(runId, { since: Math.min(now, writesRefusedSince() ?? now), error: redact(message).slice(0, 200) });
}

/** Since when `runId`'s steps have been failing on the database, as remembered in this process (null: they are not). */
export function databaseOutageOf(runId: string): { since: number } | null {
  const outage = outages.get(runId);
  return outage ? { since: outage.since } : null;
}

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 19);

/**
 * At the start of a step of `runId` whose steps were failing on the database: a write tells whether it is back (a read
 * does not: reads go on while another process holds the write lock). Back, an outage longer than the retries is
 * recorded (under its own step key, so a step run again does not double it) as a pause with reason `database` and its
 * automatic resume; a shorter one is forgotten. Throws while it is still away (the step then fails on it as before).
 */
export async function recordDatabaseOutage(runId: string, stepKey: string): Promise<void> {
  const outage = outages.get(runId);
  if (!outage) return;
  await write((tx) => tx.run(sql`UPDATE workflow_runs SET updated_at = updated_at WHERE id = ${runId}`));
  const now = Date.now();
  if (now - outage.since >= DATABASE_PATIENCE_MS) {
    const seconds = Math.round((now - outage.since) / 1000);
    const message =
      `Paused: the database could not be written from ${clock(outage.since)} UTC for about ${seconds} s (${outage.error}). ` +
      "The run waited and went on by itself once the database took writes again; nothing done before it was lost or done twice. " +
      "If this repeats, look for what holds the database (a backup, another process, a full or unreachable disk).";
    try {
      await append(runId, `${stepKey}:database:${outage.since}`, [
        { type: "RUN_PAUSED", payload: { reason: "database", message, stage: null } },
        { type: "RUN_RESUMED", payload: { by: "gatehouse", action: "retry" } },
      ]);
    } catch (error) {
      // A run that cannot pause now (already paused, or ended meanwhile): the record is dropped, the step goes on.
      if (!(error instanceof AppError && error.code === "conflict:run")) throw error;
    }
  }
  outages.delete(runId);
}
