import { beforeAll, describe, expect, it } from "vitest";
import { getClient, getNative } from "@/lib/db";
import { createProject } from "@/lib/projects/queries";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvent, getRunState, listEvents, replay } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { append, RunEndedError } from "@/lib/runs/steps/context";
import { acknowledgeDecision, decisionSettled } from "@/lib/runs/gates/acks";
import { requeueIfFull } from "@/lib/runs/steps/start";
import { getEnv } from "@/lib/env";
import { write } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { appendEventsTx } from "@/lib/db/event-store";
import { approveGate, rejectGate } from "@/lib/runs/gates/decide-gate";
import { newId } from "@/lib/ids";

/*
 * The writes a run makes on its way from a person's decision to its next stage (issue 33: "Approve clicked → the
 * implementation step started"): the decision itself (the gate's claim and its event), the waiting step's acknowledgement, the slot check, the stage events. Each was a
 * Drizzle transaction of its own through the write queue (BEGIN IMMEDIATE and ROLLBACK on the native writer to take
 * the lock, then a pooled connection's transaction): a few milliseconds per step. They are counted here as the
 * statements the native writer runs and the transactions the client's pool opens.
 */

let projectId: string;
let userId: string;

beforeAll(async () => {
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "s", ownerId: userId, repository: { type: "local", path: "/tmp/s" } })).id;
});

const newRun = () => createRun({ projectId, userId, request: "step writes", config: {} });

/** The native writer's statements and the client's transactions while `fn` runs. */
async function writesOf<T>(fn: () => Promise<T>): Promise<{ value: T; statements: string[]; clientTransactions: number }> {
  const native = await getNative();
  if (!native) throw new Error("these tests run on a file database");
  const client = await getClient();
  const writer = native.writer;
  const statements: string[] = [];
  const { execute, exec } = writer;
  const { transaction } = client;
  let clientTransactions = 0;
  writer.execute = ((sql: string, args?: never) => {
    if (sql !== "PRAGMA data_version") statements.push(sql.replace(/\s+/g, " ").trim());
    return execute.call(writer, sql, args);
  }) as typeof writer.execute;
  writer.exec = (sql: string) => {
    statements.push(sql);
    exec.call(writer, sql);
  };
  client.transaction = ((...args: Parameters<typeof transaction>) => {
    clientTransactions++;
    return transaction.apply(client, args);
  }) as typeof transaction;
  try {
    return { value: await fn(), statements, clientTransactions };
  } finally {
    writer.execute = execute;
    writer.exec = exec;
    client.transaction = transaction;
  }
}

describe("a run step's events (append)", () => {
  it("are written by the native writer in one group commit: no transaction on the client's pool", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    const { value, statements, clientTransactions } = await writesOf(() =>
      append(run.id, "planning:start", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }]),
    );
    expect(clientTransactions).toBe(0);
    // The lock, the step's earlier events (none), the projection's guarded UPDATE, the event, the COMMIT.
    expect(statements[0]).toBe("BEGIN IMMEDIATE");
    expect(statements.at(-1)).toBe("COMMIT");
    expect(statements.filter((s) => s.startsWith("INSERT INTO workflow_events"))).toHaveLength(1);
    expect(statements).toHaveLength(5);
    expect(value.events.map((e) => e.type)).toEqual(["STAGE_STARTED"]);
    expect((await getRunState({ id: run.id }))?.currentStage).toBe("planning");
    expect(await replay({ runId: run.id })).toEqual(await getRunState({ id: run.id }));
  });

  it("a re-run step gets its stored events, written once; a step of a run that has ended is refused with RunEndedError", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    const first = await append(run.id, "planning:start", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }]);
    const again = await append(run.id, "planning:start", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }]);
    expect(again.duplicate).toBe(true);
    expect(again.events.map((e) => e.sequence)).toEqual(first.events.map((e) => e.sequence));

    await appendEvent(run.id, { type: "RUN_CANCELLED", payload: { by: userId } });
    await expect(append(run.id, "planning:done", [{ type: "STAGE_COMPLETED", payload: { stage: "planning" } }])).rejects.toBeInstanceOf(RunEndedError);
    // A step that wrote before the run ended (re-run after a crash) still gets what it wrote.
    expect((await append(run.id, "planning:start", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }])).duplicate).toBe(true);
    expect((await listEvents({ runId: run.id })).map((e) => e.type)).toEqual(["RUN_CREATED", "RUN_STARTED", "STAGE_STARTED", "RUN_CANCELLED"]);
  });

  it("a run ended by another process (this process's remembered projection is stale) is refused with RunEndedError too", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    await append(run.id, "planning:start", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }]);
    // Another process's cancellation: written past this process's cache of the run.
    const client = await getClient();
    const state = (await getRunState({ id: run.id }))!;
    await client.execute({
      sql: "UPDATE workflow_runs SET status = 'cancelled', last_sequence = last_sequence + 1 WHERE id = ?",
      args: [run.id],
    });
    await client.execute({
      sql: "INSERT INTO workflow_events (id, workflow_run_id, type, payload, timestamp, sequence) VALUES (?, ?, 'RUN_CANCELLED', ?, ?, ?)",
      args: [`evt_other_${run.id}`, run.id, JSON.stringify({ by: "other" }), Date.now(), state.lastSequence + 1],
    });
    await expect(append(run.id, "planning:done", [{ type: "STAGE_COMPLETED", payload: { stage: "planning" } }])).rejects.toBeInstanceOf(RunEndedError);
    expect((await listEvents({ runId: run.id })).at(-1)?.type).toBe("RUN_CANCELLED");
  });

  it("afterEnd: a completed run still takes what the reducer allows after the end", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    await appendEvent(run.id, { type: "RUN_CANCELLED", payload: { by: userId } });
    // Not allowed after a cancellation by the reducer: a conflict, not RunEndedError (afterEnd skips that check).
    const refused = await append(run.id, "late", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }], { afterEnd: true }).catch((e: unknown) => e);
    expect(refused).not.toBeInstanceOf(RunEndedError);
    expect((refused as { type?: string }).type).toBe("conflict");
  });
});

describe("a waiting step's acknowledgement of a decision", () => {
  it("is one prepared INSERT in the native writer's group commit, and settles the decision", async () => {
    const run = await newRun();
    const { statements, clientTransactions } = await writesOf(() => acknowledgeDecision({ runId: run.id, key: "gate:g1" }));
    expect(clientTransactions).toBe(0);
    expect(statements).toEqual([
      "BEGIN IMMEDIATE",
      "INSERT INTO decision_acks (workflow_run_id, decision_key, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
      "COMMIT",
    ]);
    expect(await decisionSettled({ runId: run.id, key: "gate:g1" })).toBe(true);
    // Acknowledged again (a re-run check step): harmless.
    await acknowledgeDecision({ runId: run.id, key: "gate:g1" });
    expect(await decisionSettled({ runId: run.id, key: "gate:g2" })).toBe(false);
  });
});

describe("the slot check after a wait (requeueIfFull)", () => {
  it("under the limit: read only, no write transaction; at the limit: the run is queued as before", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    const under = await writesOf(() => requeueIfFull({ runId: run.id, stepKey: "gate:slot" }));
    expect(under.value).toEqual({ queued: false, userId });
    expect(under.clientTransactions).toBe(0);
    expect(under.statements).toEqual([]);

    // Enough other runs of the user computing to fill the limit: this one goes back to the queue.
    const limit = getEnv().MAX_CONCURRENT_RUNS_PER_USER;
    const others = await Promise.all(Array.from({ length: limit }, () => newRun()));
    await Promise.all(others.map((o) => appendEvent(o.id, { type: "RUN_STARTED", payload: {} })));
    const full = await requeueIfFull({ runId: run.id, stepKey: "gate:slot" });
    expect(full).toEqual({ queued: true, userId });
    expect((await getRunState({ id: run.id }))?.status).toBe("queued");
    for (const o of others) await appendEvent(o.id, { type: "RUN_CANCELLED", payload: { by: userId } });
  });
});

describe("a gate decision (the approve route's write)", () => {
  /** A run waiting at a plan gate, as the workflow opens one. */
  async function atPlanGate() {
    const run = await newRun();
    const gateId = newId("gate");
    await write(async (tx) => {
      await appendEventsTx(tx, run.id, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage: "planning" } }]);
      await tx.insert(gates).values({ id: gateId, workflowRunId: run.id, gateNumber: 1, kind: "plan", context: { plan: { summary: "s", mermaid: "flowchart TD\n  A --> B", tasks: [], acceptanceCriteria: [] } } });
      await appendEventsTx(tx, run.id, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind: "plan" } }]);
    });
    return { runId: run.id, gateId };
  }
  const user = () => ({ id: userId, name: "owner", via: "admin-token" as const });

  it("claims the gate and appends its event in one native group commit: no transaction on the client's pool", async () => {
    const { runId, gateId } = await atPlanGate();
    const { value: gate, statements, clientTransactions } = await writesOf(() => approveGate({ user: user(), runId, input: { gateId, notes: "fine" } }));
    expect(clientTransactions).toBe(0);
    expect(statements[0]).toBe("BEGIN IMMEDIATE");
    expect(statements.at(-1)).toBe("COMMIT");
    expect(statements.filter((s) => s.startsWith("UPDATE gates SET"))).toHaveLength(1);
    expect(statements.filter((s) => s.startsWith("INSERT INTO workflow_events"))).toHaveLength(1);
    // The row as the claim's RETURNING gave it before: decided, with the plan in its context.
    expect(gate).toMatchObject({ id: gateId, status: "approved", decision: "approve", decidedBy: userId, notes: "fine", kind: "plan" });
    expect(gate.decidedAt).toBeInstanceOf(Date);
    expect((gate.context as { plan?: unknown }).plan).toBeTruthy();
    expect((await listEvents({ runId })).at(-1)).toMatchObject({ type: "APPROVAL_GRANTED", payload: { gateId, by: userId, notes: "fine" } });
    expect((await getRunState({ id: runId }))?.status).toBe("running");
    expect(await replay({ runId })).toEqual(await getRunState({ id: runId }));
  });

  it("decides on the stored run when this process's remembered projection is stale (the gate opened in a write() transaction)", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    // Remembered by this process: running, in planning, no gate.
    await append(run.id, "planning:start", [{ type: "STAGE_STARTED", payload: { stage: "planning" } }]);
    const gateId = newId("gate");
    await write(async (tx) => {
      await tx.insert(gates).values({ id: gateId, workflowRunId: run.id, gateNumber: 1, kind: "plan" });
      await appendEventsTx(tx, run.id, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind: "plan" } }]);
    });
    const gate = await approveGate({ user: user(), runId: run.id, input: { gateId } });
    expect(gate.status).toBe("approved");
    expect((await listEvents({ runId: run.id })).at(-1)?.type).toBe("APPROVAL_GRANTED");
    // And a step's append after it builds on the decision.
    await append(run.id, "planning:done", [{ type: "STAGE_COMPLETED", payload: { stage: "planning" } }]);
    expect(await replay({ runId: run.id })).toEqual(await getRunState({ id: run.id }));
  });

  it("a second decision of a decided gate is refused (409) and writes nothing", async () => {
    const { runId, gateId } = await atPlanGate();
    await approveGate({ user: user(), runId, input: { gateId } });
    const before = await listEvents({ runId });
    const refused = await rejectGate({ user: user(), runId, input: { gateId, feedback: "no" } }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ type: "conflict" });
    expect(String((refused as Error).message)).toMatch(/it was approved/);
    expect(await listEvents({ runId })).toEqual(before);
  });
});
