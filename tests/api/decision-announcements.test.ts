import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as projectsRoute from "@/app/api/projects/route";
import * as runsRoute from "@/app/api/runs/route";
import * as approveRoute from "@/app/api/runs/[id]/approve/route";
import * as rejectRoute from "@/app/api/runs/[id]/reject/route";
import * as askBackRoute from "@/app/api/runs/[id]/ask-back/route";
import * as fixRoute from "@/app/api/runs/[id]/fix-decision/route";
import * as budgetRoute from "@/app/api/runs/[id]/budget/route";
import * as cancelRoute from "@/app/api/runs/[id]/cancel/route";
import * as pauseRoute from "@/app/api/runs/[id]/pause/route";
import * as retryRoute from "@/app/api/runs/[id]/retry/route";
import * as resumeRoute from "@/app/api/runs/[id]/resume/route";
import * as extendRoute from "@/app/api/runs/[id]/extend/route";
import * as answerRoute from "@/app/api/clarifications/[id]/answer/route";
import * as skipRoute from "@/app/api/clarifications/[id]/skip/route";
import { write } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { appendEventsTx, listEvents } from "@/lib/db/event-store";
import { newId } from "@/lib/ids";
import type { GateKind } from "@/lib/workflow";
import { inngest } from "@/inngest/client";
import { ADMIN, call, makeRepo } from "./helpers";

/*
 * Every decision route stores the decision and then announces it the one way its kind is announced (inngest/decide.ts):
 * a decision a waiting run must take goes out with its re-announcement under its decision key (gate:<id>,
 * clarification:<id>, resume:<sequence of RUN_RESUMED>); a cancel and a merge are announced once; a pause not at all.
 */

type Sent = { name: string; data: Record<string, unknown> };
const send = vi.spyOn(inngest, "send");
let projectId: string;

beforeAll(async () => {
  const res = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body: { name: "announcements", repository: { type: "local", path: makeRepo() } } });
  projectId = res.json.project.id;
});
beforeEach(() => {
  // Nothing is sent anywhere: only what each route announces is recorded.
  send.mockReset().mockResolvedValue({ ids: [] } as never);
});
afterAll(() => send.mockRestore());

/** The events sent, in order (an array send counts as its events). */
const sent = (): Sent[] => send.mock.calls.flatMap(([payload]) => (Array.isArray(payload) ? payload : [payload]) as Sent[]);

async function runningRun(stage: "planning" | "implementation" | "validation" = "planning") {
  const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "announce things" } });
  const runId = res.json.run.id as string;
  await write((tx) => appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage } }]));
  send.mockClear();
  return runId;
}

async function openGate(runId: string, kind: GateKind, context?: Record<string, unknown>) {
  const gateId = newId("gate");
  await write(async (tx) => {
    await tx.insert(gates).values({ id: gateId, workflowRunId: runId, gateNumber: 1, kind, context });
    await appendEventsTx(tx, runId, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind } }]);
  });
  return gateId;
}

async function ask(runId: string) {
  const id = newId("clr");
  await write(async (tx) => {
    await tx.insert(clarificationRequests).values({ id, workflowRunId: runId, stage: "implementation", question: "Which?", responseType: "text" });
    await appendEventsTx(tx, runId, [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId: id, stage: "implementation", question: "Which?" } }]);
  });
  return id;
}

/** An announcement with its hand-over to the re-announcer under `key`. */
function announcedWithKey(name: string, data: Record<string, unknown>, key: string) {
  return [
    expect.objectContaining({ name, data }),
    expect.objectContaining({ name: "run/decision.announced", data: { runId: data.runId, key, announcement: { name, data } } }),
  ];
}

describe("gate decisions are announced under the gate's key", () => {
  const cases = [
    { route: approveRoute, kind: "plan", body: {}, decision: "approve" },
    { route: rejectRoute, kind: "plan", body: { feedback: "smaller steps" }, decision: "reject" },
    { route: askBackRoute, kind: "plan", body: { question: "why this order?" }, decision: "ask" },
    { route: budgetRoute, kind: "budget", body: { action: "raise", tokens: 1000 }, decision: "raise" },
    { route: fixRoute, kind: "fix", body: { decision: "accept" }, decision: "accept" },
  ] as const;
  for (const c of cases) {
    it(`${c.decision} at a ${c.kind} gate`, async () => {
      const runId = await runningRun(c.kind === "fix" ? "validation" : "implementation");
      const gateId = await openGate(runId, c.kind, c.kind === "budget" ? { stage: "implementation" } : undefined);
      const res = await call(c.route.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId, ...c.body } });
      expect(res.status).toBe(200);
      expect(res.json.gate).toMatchObject({ id: gateId });
      expect(sent()).toEqual(announcedWithKey("run/gate.decided", { runId, gateId, decision: c.decision }, `gate:${gateId}`));
    });
  }

  it("a fix decision to cancel is announced as the gate's decision, then as the run's cancellation", async () => {
    const runId = await runningRun("validation");
    const gateId = await openGate(runId, "fix");
    const res = await call(fixRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { decision: "cancel" } });
    expect(res.status).toBe(200);
    expect(sent()).toEqual([
      ...announcedWithKey("run/gate.decided", { runId, gateId, decision: "cancel" }, `gate:${gateId}`),
      expect.objectContaining({ name: "run/cancelled", data: { runId } }),
    ]);
  });

  it("a refused decision announces nothing", async () => {
    const runId = await runningRun();
    const gateId = await openGate(runId, "fix");
    const res = await call(approveRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: { gateId } });
    expect(res.status).toBe(409);
    expect(sent()).toEqual([]);
  });
});

describe("a question answered or skipped is announced under the question's key", () => {
  for (const [name, route, body] of [["answer", answerRoute, { response: "SQLite" }], ["skip", skipRoute, undefined]] as const) {
    it(name, async () => {
      const runId = await runningRun("implementation");
      const clarificationId = await ask(runId);
      const res = await call(route.POST, { method: "POST", headers: ADMIN, params: { id: clarificationId }, body });
      expect(res.status).toBe(200);
      expect(sent()).toEqual(announcedWithKey("run/clarification.answered", { runId, clarificationId }, `clarification:${clarificationId}`));
    });
  }
});

describe("retry, resume and extend are one handler, announced under the resume's sequence", () => {
  for (const [name, route, action, reason] of [
    ["retry", retryRoute, "retry", "model_outage"],
    ["resume", resumeRoute, "retry", "by_person"],
    ["extend", extendRoute, "extend", "timeout"],
  ] as const) {
    it(name, async () => {
      const runId = await runningRun("implementation");
      await write((tx) => appendEventsTx(tx, runId, [{ type: "RUN_PAUSED", payload: { reason, message: "paused" } }]));
      const res = await call(route.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: {} });
      expect(res.status).toBe(200);
      const resumed = (await listEvents({ runId })).find((e) => e.type === "RUN_RESUMED")!;
      expect(resumed.payload).toMatchObject({ action });
      expect(sent()).toEqual(announcedWithKey("run/resumed", { runId, action }, `resume:${resumed.sequence}`));
    });
  }
});

describe("run decisions nothing waits to acknowledge", () => {
  it("a cancel is announced once, without a key", async () => {
    const runId = await runningRun();
    const res = await call(cancelRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId } });
    expect(res.status).toBe(200);
    expect(sent()).toEqual([expect.objectContaining({ name: "run/cancelled", data: { runId } })]);
  });

  it("a pause is stored and not announced (the run reads it at its next step)", async () => {
    const runId = await runningRun("implementation");
    const res = await call(pauseRoute.POST, { method: "POST", headers: ADMIN, params: { id: runId }, body: {} });
    expect(res.status).toBe(202);
    expect((await listEvents({ runId })).some((e) => e.type === "PAUSE_REQUESTED")).toBe(true);
    expect(sent()).toEqual([]);
  });
});
