import { beforeAll, describe, expect, it } from "vitest";
import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { createClient } from "@libsql/client";
import { getClient, getDb, write } from "@/lib/db";
import { getEnv } from "@/lib/env";
import { STEP_KEY_INDEX_CONDITION, TYPE_INDEX_CONDITION, TYPE_INDEXED_EVENTS, workflowEvents, workflowRuns } from "@/lib/db/schema";
import { createProject } from "@/lib/projects/queries";
import { createRun } from "@/lib/db/queries/runs";
import { APPEND_SQL, appendEvent, appendEvents, appendEventsTx, eventTypeIn } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";

/*
 * The event log's indexes are what every append pays for (one more page written per index): the log is keyed by
 * (run, sequence), the event id has no index, and the type and step-key indexes are partial. These tests hold the
 * queries to them: a query that stops naming a partial index's condition would silently scan a run's whole log.
 */

let runId: string;
beforeAll(async () => {
  const userId = (await ensureLocalOwner()).id;
  const projectId = (await createProject({ name: "idx", ownerId: userId, repository: { type: "local", path: "/tmp/x" } })).id;
  runId = (await createRun({ projectId, userId, request: "Index me", config: {} })).id;
  await appendEvent(runId, { type: "RUN_STARTED", payload: {} });
  await appendEvents(runId, [{ type: "STAGE_STARTED", payload: { stage: "planning" } }], { stepKey: "planning:start" });
  await appendEvent(runId, { type: "ARTIFACT_CREATED", payload: { type: "note", path: "a.md" } });
});

async function plan(query: { sql: string; params: unknown[] }): Promise<string> {
  // On a connection of its own, closed after: @libsql/client runs EXPLAIN as a statement that returns no rows and leaves
  // it unreset, so the connection that ran it keeps reading the snapshot of that moment (seen here: the app's client
  // then missed a later append by the native writer).
  const client = createClient({ url: getEnv().databaseUrl });
  try {
    const rows = await client.execute({ sql: `EXPLAIN QUERY PLAN ${query.sql}`, args: query.params as never[] });
    return rows.rows.map((r) => String(r.detail)).join("; ");
  } finally {
    client.close();
  }
}

describe("the run event log's indexes", () => {
  it("is keyed by (run, sequence): a second event at a taken sequence is refused, and the id has no index of its own", async () => {
    const client = await getClient();
    await expect(
      client.execute({ sql: "INSERT INTO workflow_events (id, workflow_run_id, type, payload, timestamp, sequence) VALUES ('evt_dup', ?, 'ARTIFACT_CREATED', '{}', 0, 1)", args: [runId] }),
    ).rejects.toThrow(/UNIQUE constraint failed: workflow_events\.workflow_run_id, workflow_events\.sequence/);
    const indexes = (await client.execute("SELECT name FROM pragma_index_list('workflow_events')")).rows.map((r) => String(r.name)).sort();
    expect(indexes).toEqual(["sqlite_autoindex_workflow_events_1", "workflow_events_run_step_key_idx", "workflow_events_run_type_idx"]);
    const pk = (await client.execute("SELECT name FROM pragma_index_info('sqlite_autoindex_workflow_events_1')")).rows.map((r) => String(r.name));
    expect(pk).toEqual(["workflow_run_id", "sequence"]);
  });

  it("a query by type goes through eventTypeIn and uses the partial (run, type) index, in a Drizzle query and in a raw subquery", async () => {
    const db = await getDb();
    const typed = db.select().from(workflowEvents).where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(["DECISION_ESCALATED", "APPROVAL_REQUESTED"]))).toSQL();
    expect(await plan(typed)).toMatch(/USING (COVERING )?INDEX workflow_events_run_type_idx/);
    const correlated = db
      .select({ id: workflowRuns.id })
      .from(workflowRuns)
      .where(sql`EXISTS (SELECT 1 FROM workflow_events AS e WHERE e.workflow_run_id = ${workflowRuns.id} AND ${eventTypeIn(["DECISION_ESCALATED"], sql`e.type`)})`)
      .toSQL();
    expect(await plan(correlated)).toMatch(/INDEX workflow_events_run_type_idx/);
    // An IN list of types alone does not imply the index's condition (a chain of equalities), so without the condition
    // stated the partial index is out of SQLite's reach: the reason eventTypeIn exists.
    const listed = db.select().from(workflowEvents).where(and(eq(workflowEvents.workflowRunId, runId), inArray(workflowEvents.type, ["DECISION_ESCALATED", "RUN_PAUSED"]))).toSQL();
    expect(await plan(listed)).not.toMatch(/workflow_events_run_type_idx/);
    // A type the index leaves out never reaches it.
    const unindexed = db.select().from(workflowEvents).where(and(eq(workflowEvents.workflowRunId, runId), eq(workflowEvents.type, "ARTIFACT_CREATED"))).toSQL();
    expect(await plan(unindexed)).not.toMatch(/workflow_events_run_type_idx/);
  });

  it("eventTypeIn finds the events of those types, and the type index holds only the types queries look up", async () => {
    const db = await getDb();
    const rows = await db.select({ type: workflowEvents.type }).from(workflowEvents).where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(["STAGE_STARTED"])));
    expect(rows).toEqual([{ type: "STAGE_STARTED" }]);
    const client = await getClient();
    const inIndex = await client.execute({
      sql: `SELECT type FROM workflow_events INDEXED BY workflow_events_run_type_idx WHERE workflow_run_id = ? AND ${TYPE_INDEX_CONDITION}`,
      args: [runId],
    });
    // RUN_CREATED, RUN_STARTED and ARTIFACT_CREATED were appended too, and are not in it.
    expect(inIndex.rows.map((r) => String(r.type))).toEqual(["STAGE_STARTED"]);
    expect(TYPE_INDEXED_EVENTS).not.toContain("ARTIFACT_CREATED");
  });

  it("both append paths store the step key in its column, and a step that runs again writes nothing twice", async () => {
    const client = await getClient();
    const keyed = async () =>
      (await client.execute({ sql: "SELECT type, step_key FROM workflow_events WHERE workflow_run_id = ? AND step_key IS NOT NULL ORDER BY sequence", args: [runId] })).rows.map(
        (r) => [String(r.type), String(r.step_key)],
      );
    const before = await keyed();
    // The Drizzle path (inside a write of its own, as the deadline checks use it).
    const progress = { type: "ARTIFACT_CREATED" as const, payload: { type: "note", path: "c.md" } };
    const first = await write((tx) => appendEventsTx(tx, runId, [progress], { stepKey: "deadline:g1:remind:1" }));
    const again = await write((tx) => appendEventsTx(tx, runId, [progress], { stepKey: "deadline:g1:remind:1" }));
    expect(first.duplicate).toBeUndefined();
    expect(again.duplicate).toBe(true);
    expect(again.events.map((e) => e.sequence)).toEqual(first.events.map((e) => e.sequence));
    // The native path.
    const note = { type: "ARTIFACT_CREATED" as const, payload: { type: "note", path: "b.md" } };
    const n1 = await appendEvents(runId, [note], { stepKey: "implement:1:note" });
    const n2 = await appendEvents(runId, [note], { stepKey: "implement:1:note" });
    expect(n2.duplicate).toBe(true);
    expect(n2.events[0]!.sequence).toBe(n1.events[0]!.sequence);
    expect((await keyed()).slice(before.length)).toEqual([
      ["ARTIFACT_CREATED", "deadline:g1:remind:1"],
      ["ARTIFACT_CREATED", "implement:1:note"],
    ]);
    // The payload keeps the key too, for clients.
    expect(n1.events[0]!.payload).toMatchObject({ stepKey: "implement:1:note" });
  });

  it("a step's lookup of the events it already wrote uses the partial step-key index, on both append paths", async () => {
    const db = await getDb();
    const drizzle = db
      .select()
      .from(workflowEvents)
      .where(and(eq(workflowEvents.workflowRunId, runId), sql`${workflowEvents.stepKey} = ${"planning:start"} AND ${sql.raw(STEP_KEY_INDEX_CONDITION)}`))
      .orderBy(asc(workflowEvents.sequence))
      .toSQL();
    expect(await plan(drizzle)).toMatch(/INDEX workflow_events_run_step_key_idx/);
    expect(await plan({ sql: APPEND_SQL.stepEvents, params: [runId, "planning:start"] })).toMatch(/INDEX workflow_events_run_step_key_idx/);
  });
});
