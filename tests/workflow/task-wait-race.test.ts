import { beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { getRunState, listEvents, replay } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { createRun } from "@/lib/db/queries/runs";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { ask, openGate } from "@/lib/runs/gates/open";
import { append } from "@/lib/runs/steps/context";
import { pause, waitsForNoOne } from "@/lib/runs/steps/pause";
import { claimReplan } from "@/lib/runs/steps/replan";
import { IllegalTransitionError } from "@/lib/workflow";

/*
 * The race between a parallel task's "nobody is waiting" check and its opening a wait for a person (inngest/run/waits.ts
 * openWhenFree): the check is one read, the open a later write. Another task may get in between — its re-plan claimed
 * (REPLAN_PROPOSED, the planning stage started), its question asked. The open must then refuse in the transaction that
 * would write it (an IllegalTransitionError, which openWhenFree reads as "busy": it waits and looks again), and write
 * nothing. Otherwise:
 * - a question opened while another task's re-plan is drafted leaves the run awaiting_clarification, and the re-plan's
 *   PLAN_CREATED (legal only while the run is running) fails: the proposing task's step errors until the run fails;
 * - a task's pause opened over another task's open question leaves the run paused with the question pending: its
 *   answer is then refused (CLARIFICATION_ANSWERED needs awaiting_clarification).
 * Each case below is the state right after the other task's write, which the first task's earlier check did not see.
 */

let projectId: string;
let userId: string;

beforeAll(async () => {
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "race", ownerId: userId, repository: { type: "local", path: "/tmp/gatehouse-race-none" } })).id;
});

/** A run implementing in parallel: running, in the implementation stage, nobody waited for. */
async function implementingRun() {
  const run = await createRun({ projectId, userId, request: "Parallel tasks", config: { maxClarifications: 3 } });
  // Appended as the run's steps append (lib/runs/steps/context.ts), as everything else here is.
  await append(run.id, "start", [
    { type: "RUN_STARTED", payload: {} },
    { type: "STAGE_STARTED", payload: { stage: "implementation", attempt: 1 } },
  ]);
  return run;
}

const question = (runId: string, taskId: string) => ({
  runId,
  stepKey: `impl:1:task:${taskId}:1:turn:0:q:ask`,
  stage: "implementation" as const,
  question: "Which greeting?",
  context: null,
  options: ["Hello", "Hi"],
  responseType: "single_choice" as const,
  taskId,
});

async function written(runId: string) {
  const db = await getDb();
  return {
    events: (await listEvents({ runId, limit: 1000 })).map((e) => e.type),
    questions: await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, runId)),
    gates: await db.select().from(gates).where(eq(gates.workflowRunId, runId)),
  };
}

describe("a parallel task's wait for a person, opened after another task's write it did not see", () => {
  it("a question from T2 while T1's re-plan is drafted is refused and writes nothing; T1's re-plan records its plan and opens its gate", async () => {
    const run = await implementingRun();
    // T2 looked: nobody waits.
    expect(await waitsForNoOne({ runId: run.id, taskId: "T2" })).toBe(true);
    // T1's re-plan is claimed before T2's question is written.
    const claim = await claimReplan({ runId: run.id, stepKey: "impl:1:task:T1:1:turn:0:replan:start", taskId: "T1", reason: "The plan forgot the changelog.", counted: true, maxReplans: 3 });
    expect(claim.kind).toBe("lead");
    const before = await written(run.id);

    await expect(ask(question(run.id, "T2"))).rejects.toBeInstanceOf(IllegalTransitionError);
    await expect(openGate({ runId: run.id, stepKey: "impl:1:task:T2:1:turn:0:policy:open", kind: "policy", context: { reason: "risky" }, taskId: "T2" })).rejects.toBeInstanceOf(
      IllegalTransitionError,
    );
    expect(await written(run.id)).toEqual(before);
    expect((await getRunState({ id: run.id }))!.status).toBe("running");

    // The re-plan goes on: its plan is recorded (legal only while the run runs) and its own plan gate opens.
    await append(run.id, "impl:1:task:T1:1:turn:0:replan:record", [{ type: "PLAN_CREATED", payload: { version: 2, feedback: "The plan forgot the changelog." } }]);
    const opened = await openGate({ runId: run.id, stepKey: "impl:1:task:T1:1:turn:0:replan:gate:open", kind: "plan", context: { version: 2 }, taskId: "T1" });
    const state = (await getRunState({ id: run.id }))!;
    expect(state).toMatchObject({ status: "awaiting_approval", pendingGate: { gateId: opened.gateId, kind: "plan" }, pendingClarification: null });
    expect(await replay({ runId: run.id })).toEqual(state);
  });

  it("a pause from T2 over T1's question is refused and writes nothing; T1's question is answered as usual", async () => {
    const run = await implementingRun();
    expect(await waitsForNoOne({ runId: run.id, taskId: "T2" })).toBe(true);
    // T1's question is written before T2's pause.
    const asked = await ask(question(run.id, "T1"));
    expect(asked.kind).toBe("clarification");
    const before = await written(run.id);

    await expect(
      pause({ runId: run.id, stepKey: "impl:1:task:T2:1:turn:3:timeout:pause", reason: "timeout", message: "Implementation ran over 1 minutes.", stage: "implementation", taskId: "T2" }),
    ).rejects.toBeInstanceOf(IllegalTransitionError);
    expect(await written(run.id)).toEqual(before);

    const clarificationId = (asked as { clarificationId: string }).clarificationId;
    await append(run.id, "answer", [{ type: "CLARIFICATION_ANSWERED", payload: { clarificationId, by: userId } }]);
    expect((await getRunState({ id: run.id }))!.status).toBe("running");
  });

  it("a crash re-run of a task's question already written reads it back instead of refusing it", async () => {
    const run = await implementingRun();
    const asked = await ask(question(run.id, "T1"));
    // The same step again (after a crash), with its question now the pending wait: it reads what it wrote.
    expect(await ask(question(run.id, "T1"))).toEqual(asked);
    expect((await written(run.id)).questions).toHaveLength(1);
  });
});
