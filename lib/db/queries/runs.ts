import { and, asc, desc, eq, inArray, lt, or, sql, type SQL } from "drizzle-orm";
import { getDb, write, type Tx } from "@/lib/db";
import { listEvents, rowToState, stateToRow } from "@/lib/db/event-store";
import { workflowEvents, workflowRuns } from "@/lib/db/schema";
import { newId, requestSlug } from "@/lib/ids";
import { redact, redactDeep } from "@/lib/redact";
import { apply, type RunEvent, type RunState, type RunStatus } from "@/lib/workflow";

// Runs as a whole: creating one, listing them (keyset cursors), and a few questions about a run's log. Appending to,
// replaying and importing a run's events is the event store's (lib/db/event-store.ts).

// ---------------------------------------------------------------------------------------------------------------------
// Writes

/**
 * A new run's branch: `autonomous/<run-id>-<slug of the request>`. Computed once, at creation, and stored in the run
 * (RUN_CREATED): later steps use the stored name, so a change to the slug never renames an existing run's branch. Every
 * event passes the redaction filter on its way into the log (BRANCH_CREATED carries the name), so a name that filter
 * would change — the id and slug together reading as a secret's shape — is never used: the branch is then the run id
 * alone (ids.ts keeps new run ids from ending where a shape could start).
 */
export function branchNameFor({ runId, request }: { runId: string; request: string }): string {
  const named = `autonomous/${runId}-${requestSlug(request)}`;
  return redact(named) === named ? named : `autonomous/${runId}`;
}

/** Create a run: the workflow_runs row and its RUN_CREATED event, in one transaction. */
export async function createRun({
  projectId,
  userId,
  request,
  config,
  id = newId("run"),
  tx,
  groupId,
  followUp,
  notes = [],
}: {
  projectId: string;
  userId: string;
  request: string;
  config: Record<string, unknown>;
  id?: string;
  tx?: Tx;
  groupId?: string;
  /** A follow-up works on an existing branch (a pull request's), not a new one. */
  followUp?: { runId: string; pullRequest: number | null; branch: string };
  /** What a person should know about how the run was set up (a default model replaced for lack of its key). */
  notes?: string[];
}): Promise<RunState> {
  // A secret in the request never reaches the run row, the RUN_CREATED event viewers read, the branch name, a model
  // prompt or a committed file: everything downstream is derived from the redacted text.
  request = redact(request);
  config = redactDeep(config);
  const run = async (t: Tx) => {
    const event: RunEvent = {
      type: "RUN_CREATED",
      payload: {
        projectId,
        userId,
        request,
        config,
        branch: followUp?.branch ?? branchNameFor({ runId: id, request }),
        ...(groupId ? { groupId } : {}),
        ...(notes.length ? { notes: notes.map((n) => redact(n)) } : {}),
        ...(followUp ? { followUp: { runId: followUp.runId, pullRequest: followUp.pullRequest } } : {}),
      },
      timestamp: Date.now(),
    };
    const state = apply(null, event, { runId: id, sequence: 1 });
    await t.insert(workflowRuns).values(stateToRow(state));
    await t.insert(workflowEvents).values({
      id: newId("evt"),
      workflowRunId: id,
      type: event.type,
      payload: event.payload,
      timestamp: new Date(event.timestamp),
      sequence: 1,
    });
    return state;
  };
  return tx ? run(tx) : write(run);
}


// ---------------------------------------------------------------------------------------------------------------------
// Reads

export type RunCursor = { createdAt: number; id: string };

export function encodeCursor(cursor: RunCursor): string {
  return Buffer.from(`${cursor.createdAt}:${cursor.id}`).toString("base64url");
}

export function decodeCursor(value: string): RunCursor | null {
  const text = Buffer.from(value, "base64url").toString("utf8");
  const match = /^(\d{1,16}):(run_[a-z0-9]{10,40})$/.exec(text);
  return match ? { createdAt: Number(match[1]), id: match[2]! } : null;
}

/** Runs in the given projects, newest first, keyset-paginated (stays fast at any depth). */
export async function listRuns({
  projectIds,
  status,
  cursor,
  limit = 50,
  search,
}: {
  projectIds: string[];
  status?: RunStatus[];
  cursor?: RunCursor | null;
  limit?: number;
  search?: string;
}): Promise<{ runs: RunState[]; nextCursor: string | null }> {
  if (projectIds.length === 0) return { runs: [], nextCursor: null };
  const db = await getDb();
  const where: SQL[] = [inArray(workflowRuns.projectId, projectIds)];
  if (status?.length) where.push(inArray(workflowRuns.status, status));
  if (search) where.push(sql`instr(lower(${workflowRuns.originalRequest}), ${search.toLowerCase()}) > 0`);
  if (cursor) {
    const at = new Date(cursor.createdAt);
    where.push(or(lt(workflowRuns.createdAt, at), and(eq(workflowRuns.createdAt, at), lt(workflowRuns.id, cursor.id)))!);
  }
  const rows = await db
    .select()
    .from(workflowRuns)
    .where(and(...where))
    .orderBy(desc(workflowRuns.createdAt), desc(workflowRuns.id))
    .limit(limit + 1);
  const page = rows.slice(0, limit).map(rowToState);
  const last = page[page.length - 1];
  return {
    runs: page,
    nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
  };
}

/** A person's pause request that no pause has answered yet (PAUSE_REQUESTED after the last RUN_PAUSED/RUN_RESUMED). */
export async function pendingPauseRequest({ runId }: { runId: string }): Promise<{ by: string; note: string | null } | null> {
  const events = await listEvents({ runId, limit: 100_000 });
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.type === "RUN_PAUSED" || e.type === "RUN_RESUMED") return null;
    if (e.type === "PAUSE_REQUESTED") return { by: e.payload.by, note: e.payload.note ?? null };
  }
  return null;
}

/** Ids of the runs created in one group (RUN_CREATED.groupId), oldest first. */
export async function runIdsInGroup({ groupId }: { groupId: string }): Promise<string[]> {
  const db = await getDb();
  const rows = await db
    .select({ runId: workflowEvents.workflowRunId })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.sequence, 1), sql`json_extract(${workflowEvents.payload}, '$.groupId') = ${groupId}`))
    .orderBy(asc(workflowEvents.timestamp));
  return rows.map((r) => r.runId);
}
