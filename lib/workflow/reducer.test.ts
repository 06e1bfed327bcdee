import { describe, expect, it } from "vitest";
import { apply, IllegalTransitionError, replayEvents } from "./reducer";
import type { NewRunEvent, RunEvent } from "./events";
import type { RunState, RunStatus } from "./types";

let clock = 1_700_000_000_000;
const at = <E extends NewRunEvent>(e: E) => ({ ...e, timestamp: ++clock }) as RunEvent;

function run(events: NewRunEvent[]): RunState {
  let state: RunState | null = null;
  events.forEach((e, i) => (state = apply(state, at(e), { runId: "run_1", sequence: i + 1 })));
  return state!;
}

const created: NewRunEvent = {
  type: "RUN_CREATED",
  payload: { projectId: "prj_1", userId: "usr_1", request: "do it", config: {}, branch: "autonomous/run_1-do-it" },
};
const started: NewRunEvent = { type: "RUN_STARTED", payload: {} };
const planning: NewRunEvent = { type: "STAGE_STARTED", payload: { stage: "planning" } };
const implementing: NewRunEvent = { type: "STAGE_STARTED", payload: { stage: "implementation" } };
const validating: NewRunEvent = { type: "STAGE_STARTED", payload: { stage: "validation" } };
const planGate: NewRunEvent = { type: "APPROVAL_REQUESTED", payload: { gateId: "g1", gateNumber: 1, kind: "plan" } };
const fixGate: NewRunEvent = { type: "APPROVAL_REQUESTED", payload: { gateId: "g2", gateNumber: 2, kind: "fix" } };
const ask: NewRunEvent = {
  type: "CLARIFICATION_REQUESTED",
  payload: { clarificationId: "c1", stage: "implementation", question: "Which?" },
};
const paused: NewRunEvent = { type: "RUN_PAUSED", payload: { reason: "model_outage", message: "429s" } };

/** One representative event log per status. */
const reach: Record<RunStatus, NewRunEvent[]> = {
  queued: [created],
  running: [created, started, planning],
  awaiting_approval: [created, started, planning, planGate],
  awaiting_clarification: [created, started, implementing, ask],
  awaiting_fix_decision: [created, started, validating, fixGate],
  paused: [created, started, planning, paused],
  completed: [created, started, planning, { type: "RUN_COMPLETED", payload: {} }],
  failed: [created, started, { type: "RUN_FAILED", payload: { reason: "boom" } }],
  cancelled: [created, { type: "RUN_CANCELLED", payload: { by: "usr_1" } }],
};

describe("run state machine: legal transitions", () => {
  const cases: Array<[string, RunStatus, NewRunEvent, Partial<RunState>]> = [
    ["RUN_STARTED starts a queued run", "queued", started, { status: "running" }],
    ["RUN_CANCELLED cancels a queued run", "queued", { type: "RUN_CANCELLED", payload: { by: "u" } }, { status: "cancelled" }],
    ["STAGE_STARTED sets the stage", "running", implementing, { currentStage: "implementation" }],
    ["STAGE_COMPLETED keeps running", "running", { type: "STAGE_COMPLETED", payload: { stage: "planning" } }, { status: "running" }],
    ["PLAN_CREATED bumps the plan version", "running", { type: "PLAN_CREATED", payload: { version: 1 } }, { planVersion: 1 }],
    ["a plan gate waits for approval", "running", planGate, { status: "awaiting_approval", pendingGate: { gateId: "g1", gateNumber: 1, kind: "plan" } }],
    ["a fix gate waits for a fix decision", "running", fixGate, { status: "awaiting_fix_decision" }],
    ["a clarification waits for an answer and counts", "running", ask, { status: "awaiting_clarification", clarificationCount: 1 }],
    ["APPROVAL_GRANTED resumes", "awaiting_approval", { type: "APPROVAL_GRANTED", payload: { gateId: "g1", by: "u" } }, { status: "running", pendingGate: null }],
    ["APPROVAL_REJECTED resumes for a re-plan and counts", "awaiting_approval", { type: "APPROVAL_REJECTED", payload: { gateId: "g1", by: "u", feedback: "no" } }, { status: "running", rejections: 1 }],
    ["PLAN_QUESTION_ASKED resumes for a revised plan without counting a rejection", "awaiting_approval", { type: "PLAN_QUESTION_ASKED", payload: { gateId: "g1", by: "u", question: "why?" } }, { status: "running", pendingGate: null, rejections: 0 }],
    ["RUN_PAUSED with an invalid plan keeps the draft for the editor", "running", { type: "RUN_PAUSED", payload: { reason: "invalid_plan", message: "bad", stage: "planning", plan: { summary: "s", mermaid: "x", tasks: [], acceptanceCriteria: [] } } }, { status: "paused", pauseReason: { reason: "invalid_plan", message: "bad", stage: "planning", plan: { summary: "s", mermaid: "x", tasks: [], acceptanceCriteria: [] } } }],
    ["CLARIFICATION_ANSWERED resumes", "awaiting_clarification", { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "c1", by: "u" } }, { status: "running", pendingClarification: null }],
    ["FIX_DECISION_MADE resumes", "awaiting_fix_decision", { type: "FIX_DECISION_MADE", payload: { gateId: "g2", by: "u", decision: "retry" } }, { status: "running", pendingGate: null }],
    ["RUN_PAUSED pauses a running run", "running", paused, { status: "paused", pauseReason: { reason: "model_outage", message: "429s", stage: "planning" } }],
    ["RUN_PAUSED pauses a waiting run (timeout)", "awaiting_approval", { type: "RUN_PAUSED", payload: { reason: "timeout", message: "t" } }, { status: "paused" }],
    ["RUN_RESUMED resumes a paused run", "paused", { type: "RUN_RESUMED", payload: { by: "u", action: "retry" } }, { status: "running", pauseReason: null }],
    ["RUN_COMPLETED completes", "running", { type: "RUN_COMPLETED", payload: {} }, { status: "completed" }],
    ["RUN_FAILED fails a running run", "running", { type: "RUN_FAILED", payload: { reason: "x" } }, { status: "failed", error: "x" }],
    ["RUN_FAILED fails a paused run", "paused", { type: "RUN_FAILED", payload: { reason: "x" } }, { status: "failed" }],
    ["RUN_CANCELLED cancels a waiting run and clears its gate", "awaiting_approval", { type: "RUN_CANCELLED", payload: { by: "u" } }, { status: "cancelled", pendingGate: null }],
    ["RUN_CANCELLED cancels during a clarification", "awaiting_clarification", { type: "RUN_CANCELLED", payload: { by: "u" } }, { status: "cancelled", pendingClarification: null }],
    ["PR_MERGED is recorded after completion", "completed", { type: "PR_MERGED", payload: { number: 3 } }, { status: "completed", merged: true }],
    ["BRANCH_CREATED names the branch", "running", { type: "BRANCH_CREATED", payload: { branch: "autonomous/x" } }, { branch: "autonomous/x" }],
    ["PR_OPENED records the pull request", "running", { type: "PR_OPENED", payload: { number: 7, url: "u", draft: true } }, { pullRequest: { number: 7, url: "u", draft: true, state: "open" } }],
  ];
  it.each(cases)("%s", (_name, from, event, expected) => {
    const before = run(reach[from]);
    expect(before.status).toBe(from);
    const after = apply(before, at(event), { runId: "run_1", sequence: before.lastSequence + 1 });
    expect(after).toMatchObject(expected);
    expect(after.lastSequence).toBe(before.lastSequence + 1);
  });

  it("records timestamps from the events, so replay is deterministic", () => {
    const state = run([created, started]);
    expect(state.startedAt).toBe(clock);
    expect(state.createdAt).toBe(clock - 1);
  });

  it("implementation results only count in the implementation stage", () => {
    const state = run([created, started, implementing, { type: "IMPLEMENTATION_SUCCEEDED", payload: { attempt: 2 } }]);
    expect(state.implementationAttempts).toBe(2);
  });
});

describe("run state machine: illegal transitions are rejected", () => {
  const cases: Array<[string, RunStatus, NewRunEvent]> = [
    ["APPROVAL_GRANTED with no gate pending", "running", { type: "APPROVAL_GRANTED", payload: { gateId: "g1", by: "u" } }],
    ["APPROVAL_GRANTED for another gate", "awaiting_approval", { type: "APPROVAL_GRANTED", payload: { gateId: "other", by: "u" } }],
    ["APPROVAL_REJECTED while a clarification waits", "awaiting_clarification", { type: "APPROVAL_REJECTED", payload: { gateId: "g1", by: "u", feedback: "f" } }],
    ["PLAN_QUESTION_ASKED for another gate", "awaiting_approval", { type: "PLAN_QUESTION_ASKED", payload: { gateId: "other", by: "u", question: "q" } }],
    ["a second gate while one is pending", "awaiting_approval", planGate],
    ["FIX_DECISION_MADE on a plan gate", "awaiting_approval", { type: "FIX_DECISION_MADE", payload: { gateId: "g1", by: "u", decision: "retry" } }],
    ["CLARIFICATION_ANSWERED for an unknown question", "awaiting_clarification", { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "nope", by: "u" } }],
    ["CLARIFICATION_ANSWERED when nothing was asked", "running", { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "c1", by: "u" } }],
    ["a clarification while waiting for approval", "awaiting_approval", ask],
    ["RUN_STARTED twice", "running", started],
    ["STAGE_STARTED while queued", "queued", planning],
    ["STAGE_STARTED while waiting", "awaiting_approval", implementing],
    ["RUN_COMPLETED while waiting for approval", "awaiting_approval", { type: "RUN_COMPLETED", payload: {} }],
    ["RUN_RESUMED when not paused", "running", { type: "RUN_RESUMED", payload: { by: "u" } }],
    ["anything after completion", "completed", started],
    ["RUN_CANCELLED after completion", "completed", { type: "RUN_CANCELLED", payload: { by: "u" } }],
    ["RUN_FAILED after cancellation", "cancelled", { type: "RUN_FAILED", payload: { reason: "x" } }],
    ["RUN_CANCELLED after failure", "failed", { type: "RUN_CANCELLED", payload: { by: "u" } }],
    ["PR_MERGED for a cancelled run", "cancelled", { type: "PR_MERGED", payload: {} }],
    ["PLAN_CREATED outside planning", "awaiting_clarification", { type: "PLAN_CREATED", payload: { version: 1 } }],
    ["VALIDATION_PASSED during planning", "running", { type: "VALIDATION_PASSED", payload: { attempt: 1 } }],
    ["a second RUN_CREATED", "queued", created],
  ];
  it.each(cases)("%s", (_name, from, event) => {
    const before = run(reach[from]);
    expect(() => apply(before, at(event), { runId: "run_1", sequence: before.lastSequence + 1 })).toThrow(
      IllegalTransitionError,
    );
  });

  it("any event before RUN_CREATED", () => {
    expect(() => apply(null, at(started), { runId: "run_1", sequence: 1 })).toThrow(/does not exist/);
  });

  it("a stale plan version", () => {
    const state = run([created, started, planning, { type: "PLAN_CREATED", payload: { version: 2 } }]);
    expect(() => apply(state, at({ type: "PLAN_CREATED", payload: { version: 2 } }), { runId: "run_1", sequence: 9 })).toThrow(
      /not new/,
    );
  });
});

describe("replayEvents", () => {
  it("folds a log to the same state as applying it step by step", () => {
    const events = reach.awaiting_fix_decision.map((e, i) => ({ ...at(e), sequence: i + 1 }));
    const stepwise = events.reduce<RunState | null>((s, e) => apply(s, e, { runId: "run_1", sequence: e.sequence }), null);
    expect(replayEvents("run_1", events)).toEqual(stepwise);
    expect(replayEvents("run_1", [])).toBeNull();
  });
});

describe("a decision's deadline (DECISION_REMINDED / TIMED_OUT / ESCALATED / DEFAULTED)", () => {
  const subject = { type: "gate" as const, id: "g1" };
  const steps: NewRunEvent[] = [
    { type: "DECISION_REMINDED", payload: { subject, reminder: 0, deadline: 1 } },
    { type: "DECISION_TIMED_OUT", payload: { subject, deadline: 1, action: "escalate" } },
    { type: "DECISION_ESCALATED", payload: { subject, to: { role: "owner" }, recipients: ["usr_1"] } },
    { type: "DECISION_DEFAULTED", payload: { subject, answer: "approve" } },
  ];

  it("are recorded while the run waits for the decision, and change nothing else", () => {
    const waiting = run(reach.awaiting_approval);
    let state = waiting;
    steps.forEach((e, i) => (state = apply(state, at(e), { runId: "run_1", sequence: waiting.lastSequence + i + 1 })));
    expect({ ...state, lastSequence: 0, updatedAt: 0 }).toEqual({ ...waiting, lastSequence: 0, updatedAt: 0 });
    // The default's decision is its own event: the gate is decided by APPROVAL_GRANTED after DECISION_DEFAULTED.
    const decided = apply(state, at({ type: "APPROVAL_GRANTED", payload: { gateId: "g1", by: "deadline" } }), { runId: "run_1", sequence: state.lastSequence + 1 });
    expect(decided.status).toBe("running");
  });

  it("are refused when the run is not waiting for a person's decision", () => {
    for (const status of ["running", "paused", "completed", "cancelled"] as const) {
      const state = run(reach[status]);
      for (const e of steps) expect(() => apply(state, at(e), { runId: "run_1", sequence: state.lastSequence + 1 })).toThrow(IllegalTransitionError);
    }
  });
});

describe("re-plans during implementation and parallel tasks' waits", () => {
  const lead = (taskId: string): NewRunEvent => ({ type: "REPLAN_PROPOSED", payload: { taskId, reason: `from ${taskId}`, outcome: "planning", counted: true } });
  const base = [created, started, implementing];

  it("one re-plan at a time: a second one cannot lead until the first's planning stage completes; each counts once", () => {
    const open = run([...base, lead("T1"), planning]);
    expect(open.replanning).toEqual({ taskId: "T1" });
    expect(open.replans).toBe(1);
    expect(() => apply(open, at(lead("T2")), { runId: "run_1", sequence: open.lastSequence + 1 })).toThrow(IllegalTransitionError);
    const closed = run([...base, lead("T1"), planning, { type: "STAGE_COMPLETED", payload: { stage: "planning" } }, lead("T2")]);
    expect(closed.replanning).toEqual({ taskId: "T2" });
    expect(closed.replans).toBe(2);
  });

  it("a proposal joins only the re-plan's own pending plan gate", () => {
    const joined: NewRunEvent = { type: "REPLAN_PROPOSED", payload: { taskId: "T2", reason: "also", outcome: "joined", gateId: "g1" } };
    expect(run([...base, lead("T1"), planning, planGate, joined]).status).toBe("awaiting_approval");
    expect(() => run([...base, lead("T1"), planning, joined])).toThrow(IllegalTransitionError);
    expect(() => run([...base, planGate, joined])).toThrow(IllegalTransitionError);
  });

  it("a wait a parallel task opened keeps the run's slot until the run runs again", () => {
    const taskAsk: NewRunEvent = { type: "CLARIFICATION_REQUESTED", payload: { clarificationId: "c1", stage: "implementation", question: "Which?", taskId: "T2" } };
    const waiting = run([...base, taskAsk]);
    expect(waiting.holdsSlot).toBe(true);
    expect(run([...base, ask]).holdsSlot).toBeUndefined();
    const answered = run([...base, taskAsk, { type: "CLARIFICATION_ANSWERED", payload: { clarificationId: "c1", by: "usr_1" } }]);
    expect(answered.status).toBe("running");
    expect(answered.holdsSlot).toBeUndefined();
  });
});
