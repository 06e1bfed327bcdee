import { beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { workflowEvents, workflowRuns } from "@/lib/db/schema";
import { createProject } from "@/lib/projects/queries";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvent, appendEvents, appendEventsTx, getRunState, importRun, listEvents, replay } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";

let projectId: string;
let userId: string;

beforeAll(async () => {
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "p", ownerId: userId, repository: { type: "local", path: "/tmp/x" } })).id;
});

async function newRun() {
  return createRun({ projectId, userId, request: "Add a login page", config: { maxClarifications: 1 } });
}

describe("appendEvent", () => {
  it("writes RUN_CREATED as sequence 1 with a queued projection and a branch name", async () => {
    const run = await newRun();
    expect(run.status).toBe("queued");
    expect(run.branch).toMatch(new RegExp(`^autonomous/${run.id}-add-a-login-page$`));
    const events = await listEvents({ runId: run.id });
    expect(events.map((e) => [e.sequence, e.type])).toEqual([[1, "RUN_CREATED"]]);
  });

  it("50 parallel appends to one run give sequences 1..51 with no gap or duplicate, and replay equals the projection", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    await Promise.all(
      Array.from({ length: 49 }, (_, i) =>
        appendEvent(run.id, { type: "ARTIFACT_CREATED", payload: { type: "note", path: `f${i}.md` } }),
      ),
    );
    const events = await listEvents({ runId: run.id });
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 51 }, (_, i) => i + 1));
    const stored = await getRunState({ id: run.id });
    expect(stored?.lastSequence).toBe(51);
    expect(await replay({ runId: run.id })).toEqual(stored);
  });

  it("rejects an event that is illegal in the current state and writes nothing", async () => {
    const run = await newRun();
    await expect(
      appendEvent(run.id, { type: "APPROVAL_GRANTED", payload: { gateId: "gate_x", by: userId } }),
    ).rejects.toMatchObject({ code: "conflict:run" });
    const db = await getDb();
    const rows = await db.select().from(workflowEvents).where(eq(workflowEvents.workflowRunId, run.id));
    expect(rows).toHaveLength(1);
    expect((await getRunState({ id: run.id }))?.status).toBe("queued");
  });

  it("a batch with one illegal event leaves no partial events behind", async () => {
    const run = await newRun();
    await expect(
      appendEvents(run.id, [
        { type: "RUN_STARTED", payload: {} },
        { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "clr_x", by: userId } },
      ]),
    ).rejects.toMatchObject({ code: "conflict:run" });
    expect(await listEvents({ runId: run.id })).toHaveLength(1);
    expect((await getRunState({ id: run.id }))?.status).toBe("queued");
  });

  it("every column an append changes reaches the stored row (the UPDATE names only changed columns)", async () => {
    const run = await newRun();
    const steps = [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "planning" } },
      { type: "ARTIFACT_CREATED", payload: { type: "note", path: "plan.md" } },
      { type: "CLARIFICATION_REQUESTED", payload: { clarificationId: "clr_1", stage: "planning", question: "Which DB?" } },
      { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "clr_1", by: userId } },
    ] as const;
    const seen = new Set<string>();
    for (const event of steps) {
      await appendEvent(run.id, event);
      const stored = await getRunState({ id: run.id });
      expect(stored).toEqual(await replay({ runId: run.id }));
      seen.add(`${stored?.status}/${stored?.currentStage}/${stored?.clarificationCount}`);
    }
    // The walk changed status, stage and the clarification count, not only the sequence.
    expect(seen.size).toBeGreaterThanOrEqual(4);
  });

  it("importRun rebuilds the same projection from an exported event log", async () => {
    const run = await newRun();
    await appendEvents(run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "planning" } },
      { type: "CLARIFICATION_REQUESTED", payload: { clarificationId: "clr_1", stage: "planning", question: "Which DB?" } },
      { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "clr_1", by: userId } },
    ]);
    const before = await getRunState({ id: run.id });
    const events = await listEvents({ runId: run.id });
    const db = await getDb();
    await db.delete(workflowRuns).where(eq(workflowRuns.id, run.id));
    expect(await getRunState({ id: run.id })).toBeNull();
    await importRun({ runId: run.id, events });
    expect(await getRunState({ id: run.id })).toEqual(before);
    expect(await listEvents({ runId: run.id })).toEqual(events);
  });
});

describe("the remembered projection (appends skip reading the run row)", () => {
  it("an append made by other means in between (another process, a caller's own transaction) is never overwritten", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} }); // remembered at sequence 2
    // Not through appendEvents, so this process's memory of the run is now one event behind the database.
    await write((tx) => appendEventsTx(tx, run.id, [{ type: "ARTIFACT_CREATED", payload: { type: "note", path: "other.md" } }]));
    const { event, state } = await appendEvent(run.id, { type: "ARTIFACT_CREATED", payload: { type: "note", path: "mine.md" } });
    expect(event.sequence).toBe(4);
    expect(state.lastSequence).toBe(4);
    expect((await listEvents({ runId: run.id })).map((e) => e.sequence)).toEqual([1, 2, 3, 4]);
    const stored = await getRunState({ id: run.id });
    expect({ ...stored, updatedAt: 0 }).toEqual({ ...(await replay({ runId: run.id })), updatedAt: 0 });
  });

  it("a run replaced by importRun is read again, not taken from memory", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    await appendEvent(run.id, { type: "ARTIFACT_CREATED", payload: { type: "note", path: "a.md" } });
    const events = await listEvents({ runId: run.id });
    // The rebuilt copy holds only the first two events: memory (at 3) must not be trusted over it.
    await importRun({ runId: run.id, events: events.slice(0, 2) });
    const { event } = await appendEvent(run.id, { type: "ARTIFACT_CREATED", payload: { type: "note", path: "b.md" } });
    expect(event.sequence).toBe(3);
    expect((await listEvents({ runId: run.id })).map((e) => (e.payload as { path?: string }).path ?? e.type)).toEqual(["RUN_CREATED", "RUN_STARTED", "b.md"]);
  });

  it("an append rejected as illegal leaves memory as it was: the next legal append still gets the next sequence", async () => {
    const run = await newRun();
    await appendEvent(run.id, { type: "RUN_STARTED", payload: {} });
    await expect(appendEvent(run.id, { type: "RUN_CREATED", payload: {} } as never)).rejects.toMatchObject({ code: "conflict:run" });
    const { event } = await appendEvent(run.id, { type: "ARTIFACT_CREATED", payload: { type: "note", path: "c.md" } });
    expect(event.sequence).toBe(3);
  });
});

describe("appendEvents with a step key", () => {
  it("writes a re-run step's events once", async () => {
    const run = await newRun();
    const first = await appendEvents(run.id, [{ type: "RUN_STARTED", payload: {} }], { stepKey: "start" });
    const again = await appendEvents(run.id, [{ type: "RUN_STARTED", payload: {} }], { stepKey: "start" });
    expect(again.duplicate).toBe(true);
    expect(again.events.map((e) => e.sequence)).toEqual(first.events.map((e) => e.sequence));
    expect((await listEvents({ runId: run.id })).map((e) => e.type)).toEqual(["RUN_CREATED", "RUN_STARTED"]);
    expect(await replay({ runId: run.id })).toEqual(await getRunState({ id: run.id }));
  });
});

describe("secrets in events", () => {
  it("are redacted before an event is stored, whoever appends it", async () => {
    const run = await newRun();
    const leaked = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789";
    await appendEvents(run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "RUN_FAILED", payload: { reason: `the model printed ${leaked} and -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----` } },
    ]);
    const [, , failed] = await listEvents({ runId: run.id });
    const reason = (failed!.payload as { reason: string }).reason;
    expect(reason).not.toContain(leaked);
    expect(reason).not.toContain("MIIE");
    expect(reason).toContain("[REDACTED:openai-key]");
    expect((await getRunState({ id: run.id }))?.error).toBe(reason);
  });
});
