import { beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import * as projectsRoute from "@/app/api/projects/route";
import * as runsRoute from "@/app/api/runs/route";
import * as approveRoute from "@/app/api/runs/[id]/approve/route";
import * as rejectRoute from "@/app/api/runs/[id]/reject/route";
import * as fixRoute from "@/app/api/runs/[id]/fix-decision/route";
import * as cancelRoute from "@/app/api/runs/[id]/cancel/route";
import * as retryRoute from "@/app/api/runs/[id]/retry/route";
import * as extendRoute from "@/app/api/runs/[id]/extend/route";
import * as answerRoute from "@/app/api/clarifications/[id]/answer/route";
import { write } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { appendEventsTx, getRunState, listEvents, replay } from "@/lib/db/event-store";
import { newId } from "@/lib/ids";
import type { GateKind } from "@/lib/workflow";
import { ADMIN, call, makeRepo } from "./helpers";

let projectId: string;

beforeAll(async () => {
  const res = await call(projectsRoute.POST, {
    method: "POST",
    headers: ADMIN,
    body: { name: "decisions", repository: { type: "local", path: makeRepo() } },
  });
  projectId = res.json.project.id;
});

async function runningRun(stage: "planning" | "implementation" | "validation" = "planning") {
  const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "decide things" } });
  const runId = res.json.run.id as string;
  await write((tx) =>
    appendEventsTx(tx, runId, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage } },
    ]),
  );
  return runId;
}

/** What the workflow does when it opens a gate: the row and its event in one transaction. */
async function openGate(runId: string, kind: GateKind, gateNumber = 1) {
  const gateId = newId("gate");
  await write(async (tx) => {
    await tx.insert(gates).values({ id: gateId, workflowRunId: runId, gateNumber, kind });
    await appendEventsTx(tx, runId, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber, kind } }]);
  });
  return gateId;
}

async function ask(runId: string, responseType: string, options?: string[]) {
  const id = newId("clr");
  await write(async (tx) => {
    await tx.insert(clarificationRequests).values({ id, workflowRunId: runId, stage: "implementation", question: "Which?", responseType, options });
    await appendEventsTx(tx, runId, [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId: id, stage: "implementation", question: "Which?" } }]);
  });
  return id;
}

describe("plan gate decisions", () => {
  it("20 concurrent approves of one gate apply exactly once; the rest get 409 and change nothing", async () => {
    const runId = await runningRun();
    const gateId = await openGate(runId, "plan");
    const results = await Promise.all(
      Array.from({ length: 20 }, () => call(approveRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId } })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    const conflicts = results.filter((r) => r.status === 409);
    expect(conflicts).toHaveLength(19);
    expect(conflicts[0]!.json.error.message).toMatch(/not pending: it was approved/);
    const events = await listEvents({ runId });
    expect(events.filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
    expect((await getRunState({ id: runId }))?.status).toBe("running");
    expect(await replay({ runId })).toEqual(await getRunState({ id: runId }));
  });

  it("approve with an edited plan validates the Mermaid and stores it on the gate", async () => {
    const runId = await runningRun();
    const gateId = await openGate(runId, "plan");
    const bad = await call(approveRoute.POST, {
      method: "POST", headers: ADMIN, params: { id: runId },
      body: { gateId, editedPlan: { mermaid: "flowchart TD\n  A[Start --> B" } },
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/^editedPlan\.mermaid: /);
    expect((await getRunState({ id: runId }))?.status).toBe("awaiting_approval");

    const good = await call(approveRoute.POST, {
      method: "POST", headers: ADMIN, params: { id: runId },
      body: { gateId, editedPlan: { mermaid: "flowchart TD\n  A[Start] --> B[Done]", tasks: [{ id: "t1", title: "Do it" }] } },
    });
    expect(good.status).toBe(200);
    expect(good.json.gate).toMatchObject({ status: "approved", payload: { editedPlan: { mermaid: expect.stringContaining("A[Start]") } } });
  });

  it("an edited plan's tasks keep their own acceptance commands (checks); an empty one is a 400 naming it", async () => {
    const runId = await runningRun();
    const gateId = await openGate(runId, "plan");
    const mermaid = "flowchart TD\n  A[Start] --> B[Done]";
    const bad = await call(approveRoute.POST, {
      method: "POST", headers: ADMIN, params: { id: runId },
      body: { gateId, editedPlan: { mermaid, tasks: [{ id: "t1", title: "Do it", checks: ["  "] }] } },
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/^editedPlan\.tasks\.0\.checks\.0: must not be empty/);
    expect((await getRunState({ id: runId }))?.status).toBe("awaiting_approval");
    const good = await call(approveRoute.POST, {
      method: "POST", headers: ADMIN, params: { id: runId },
      body: { gateId, editedPlan: { mermaid, tasks: [{ id: "t1", title: "Do it", checks: ["sh test.sh"] }] } },
    });
    expect(good.status).toBe(200);
    expect(good.json.gate).toMatchObject({ payload: { editedPlan: { tasks: [{ id: "t1", checks: ["sh test.sh"] }] } } });
  });

  it("reject needs feedback and records it; deciding again is a 409", async () => {
    const runId = await runningRun();
    const gateId = await openGate(runId, "plan");
    const missing = await call(rejectRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId } });
    expect(missing.status).toBe(400);
    expect(missing.json.error.message).toMatch(/feedback/);
    const ok = await call(rejectRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { feedback: "Use SQLite" } });
    expect(ok.status).toBe(200);
    expect(ok.json.gate).toMatchObject({ id: gateId, status: "rejected", notes: "Use SQLite" });
    const again = await call(approveRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId } });
    expect(again.status).toBe(409);
    const state = await getRunState({ id: runId });
    expect(state).toMatchObject({ status: "running", rejections: 1 });
  });

  it("a gate of another run is not found", async () => {
    const a = await runningRun();
    const b = await runningRun();
    const gateOfA = await openGate(a, "plan");
    await openGate(b, "plan");
    const res = await call(approveRoute.POST, { method: "POST", headers: ADMIN, params: { id: b }, body: { gateId: gateOfA } });
    expect(res.status).toBe(404);
  });
});

describe("fix decisions", () => {
  it("retry resumes; approve on a fix gate is refused", async () => {
    const runId = await runningRun("validation");
    const gateId = await openGate(runId, "fix");
    expect((await getRunState({ id: runId }))?.status).toBe("awaiting_fix_decision");
    const wrong = await call(approveRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId } });
    expect(wrong.status).toBe(409);
    const bad = await call(fixRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { decision: "maybe" } });
    expect(bad.status).toBe(400);
    const ok = await call(fixRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { decision: "retry" } });
    expect(ok.status).toBe(200);
    expect((await getRunState({ id: runId }))?.status).toBe("running");
  });

  it("\"replan\" is refused at a fix gate after validation (409, no decision stored); the gate still takes retry", async () => {
    const runId = await runningRun("validation");
    const gateId = await openGate(runId, "fix");
    const replan = await call(fixRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId, decision: "replan" } });
    expect(replan.status).toBe(409);
    expect(replan.json.error.message).toMatch(/retry, accept or cancel/);
    expect((await getRunState({ id: runId }))?.status).toBe("awaiting_fix_decision");
    expect((await call(fixRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId, decision: "retry" } })).status).toBe(200);
  });

  it("cancel at the fix decision cancels the run", async () => {
    const runId = await runningRun("validation");
    await openGate(runId, "fix");
    const ok = await call(fixRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { decision: "cancel" } });
    expect(ok.status).toBe(200);
    expect((await getRunState({ id: runId }))?.status).toBe("cancelled");
  });
});

describe("clarification answers", () => {
  it("checks the answer against the response type, and a second answer is a 409", async () => {
    const runId = await runningRun("implementation");
    const id = await ask(runId, "single_choice", ["Postgres", "SQLite"]);
    const wrong = await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id }, body: { response: "Oracle" } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.message).toMatch(/choose one of: Postgres, SQLite/);
    const ok = await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id }, body: { response: "SQLite" } });
    expect(ok.status).toBe(200);
    expect(ok.json.clarification).toMatchObject({ status: "answered", response: "SQLite" });
    expect((await getRunState({ id: runId }))?.status).toBe("running");
    const twice = await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id }, body: { response: "SQLite" } });
    expect(twice.status).toBe(409);
    const events = await listEvents({ runId });
    expect(events.filter((e) => e.type === "CLARIFICATION_ANSWERED")).toHaveLength(1);
  });

  it("multiple choice takes a list of distinct options; text takes text", async () => {
    const runId = await runningRun("implementation");
    const multi = await ask(runId, "multiple_choice", ["a", "b", "c"]);
    expect((await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id: multi }, body: { response: "a" } })).status).toBe(400);
    expect((await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id: multi }, body: { response: ["a", "a"] } })).status).toBe(400);
    expect((await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id: multi }, body: { response: ["a", "c"] } })).status).toBe(200);
    const text = await ask(runId, "text");
    expect((await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id: text }, body: { response: ["x"] } })).status).toBe(400);
    expect((await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id: text }, body: { response: "free text" } })).status).toBe(200);
  });

  it("an unknown clarification is a 404", async () => {
    const res = await call(answerRoute.POST, { method: "POST", headers: ADMIN, params: { id: "clr_nope" }, body: { response: "x" } });
    expect(res.status).toBe(404);
  });
});

describe("cancel, retry, extend", () => {
  it("cancel closes pending gates; cancelling again is a 409", async () => {
    const runId = await runningRun();
    const gateId = await openGate(runId, "plan");
    const ok = await call(cancelRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    expect(ok.status).toBe(200);
    expect(ok.json.run.status).toBe("cancelled");
    const again = await call(cancelRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    expect(again.status).toBe(409);
    const approve = await call(approveRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId } });
    expect(approve.status).toBe(409);
  });

  it("retry resumes a paused run; extend only follows a timeout", async () => {
    const runId = await runningRun("implementation");
    const notPaused = await call(retryRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    expect(notPaused.status).toBe(409);
    await write((tx) => appendEventsTx(tx, runId, [{ type: "RUN_PAUSED", payload: { reason: "model_outage", message: "429" } }]));
    const extend = await call(extendRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    expect(extend.status).toBe(409);
    const retry = await call(retryRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    expect(retry.status).toBe(200);
    expect(retry.json.run.status).toBe("running");
  });
});
