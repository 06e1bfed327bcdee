import { and, eq } from "drizzle-orm";
import { getDb, getNative, write, writeGroupedNative } from "@/lib/db";
import { decisionAcks, gates } from "@/lib/db/schema";
import { getRunState } from "@/lib/db/event-store";
import { TERMINAL_STATUSES } from "@/lib/workflow";

/*
 * Acknowledgements of decisions. Inngest's waitForEvent only matches events sent after the wait is stored, so an
 * announcement that lands between the workflow's "check the stored decision" step and its wait is not seen by that
 * wait. The workflow therefore acknowledges every decision its check step reads (here), and the re-announcer repeats a
 * decision's announcement until the acknowledgement is stored: at most one re-announcement after the wait exists wakes
 * it. The decision itself stays in its own row (exactly one applies); announcements and acknowledgements only wake.
 */

const SLOT = "slot:";

/**
 * The key of an announced decision: what the re-announcer repeats until the workflow acknowledges it. The one place the
 * idea lives: the deciding side (inngest/decide.ts) names a decision by it, the workflow's check steps acknowledge it,
 * the re-announcer (inngest/functions/decision-reannounce.ts) asks whether it is settled.
 */
export const decisionKey = {
  gate: (gateId: string) => `gate:${gateId}`,
  /**
   * A plan gate's decision as a parallel task that joined its re-plan reads it (lib/runs/steps/replan.ts): the task
   * waits for the same announcement, so the decision is settled only once every reader took it.
   */
  joined: (gateId: string, taskId: string) => `gate:${gateId}:joined:${taskId}`,
  clarification: (clarificationId: string) => `clarification:${clarificationId}`,
  /** A resume is told apart by the sequence number of its RUN_RESUMED event. */
  resume: (sequence: number) => `resume:${sequence}`,
  /** A freed slot of `userId`'s concurrency limit: settled when no run of theirs waits for a slot (not acknowledged). */
  slot: (userId: string) => `${SLOT}${userId}`,
  /** The user of a slot key, or null for a decision's key. */
  slotUser: (key: string): string | null => (key.startsWith(SLOT) ? key.slice(SLOT.length) : null),
};

/** The workflow has read this decision (called from its check step; repeating it is harmless). */
export async function acknowledgeDecision({ runId, key }: { runId: string; key: string }): Promise<void> {
  // Through the process's write queue, as every write: a write on the pool while the queue's writer holds a
  // transaction would wait in SQLite's busy handler, blocking the event loop the writer needs to finish. On a file
  // database as one prepared statement in the native writer's group commit (a waiting run's check step makes it on
  // the way from a decision to its next step), not a Drizzle transaction of its own.
  const native = await getNative();
  if (native) {
    await writeGroupedNative(native.writer, async (w) => w.execute(ACK_SQL, [runId, key, Date.now()]));
    return;
  }
  await write((tx) => tx.insert(decisionAcks).values({ workflowRunId: runId, decisionKey: key }).onConflictDoNothing());
}

/** acknowledgeDecision's insert, as Drizzle writes it (created_at: epoch ms). */
const ACK_SQL = "INSERT INTO decision_acks (workflow_run_id, decision_key, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING";

/** Whether re-announcing is over: the workflow acknowledged the decision, or the run has ended (or is gone). */
export async function decisionSettled({ runId, key }: { runId: string; key: string }): Promise<boolean> {
  const db = await getDb();
  const acked = async (k: string) =>
    !!(await db.query.decisionAcks.findFirst({ where: and(eq(decisionAcks.workflowRunId, runId), eq(decisionAcks.decisionKey, k)) }));
  if (await acked(key)) {
    // A re-plan's gate that other parallel tasks joined: each of them waits for the announcement too.
    const gateId = key.startsWith("gate:") && !key.includes(":joined:") ? key.slice("gate:".length) : null;
    const gate = gateId ? await db.query.gates.findFirst({ where: eq(gates.id, gateId) }) : null;
    const joined = ((gate?.context as { joined?: Array<{ taskId?: string | null }> } | null)?.joined ?? []).flatMap((j) => (j.taskId ? [j.taskId] : []));
    let all = true;
    for (const taskId of joined) if (!(await acked(decisionKey.joined(gateId!, taskId)))) all = false;
    if (all) return true;
  }
  const run = await getRunState({ id: runId });
  return !run || TERMINAL_STATUSES.has(run.status);
}

/**
 * A test hook, called by the check steps right after they read a decision as still pending (before the step returns and
 * the workflow stores its wait): the one moment where a decision's announcement has no wait to wake. Tests use it to
 * decide exactly then; in production it is never set.
 */
export const waitCheckHooks: {
  /** `key`: the decision's key, "resume" for a paused run, "slot" for a queued run that found no free slot. */
  afterPending?: (at: { runId: string; key: string }) => Promise<void>;
} = {};
