import { describe, expect, it } from "vitest";
import { describeEvent, mergeEvents, planVersions, stageProgress, taskTriage, validations, type ApiEvent } from "./timeline";
import { planDiff, planToText, hasChanges } from "./plan-diff";
import { runsQuery, needsPerson } from "./filters";
import { formatDuration, formatUsd } from "./format";

let seq = 0;
const ev = (type: string, payload: Record<string, unknown> = {}, at = seq): ApiEvent => ({
  sequence: ++seq,
  type,
  payload,
  timestamp: new Date(Date.UTC(2025, 0, 1, 0, 0, at)).toISOString(),
});

const plan = (mermaid: string, titles: string[]) => ({
  summary: "Add a hello file",
  mermaid,
  tasks: titles.map((title, i) => ({ id: `t${i + 1}`, title })),
  acceptanceCriteria: [{ description: "hello.txt exists" }],
});

describe("timeline", () => {
  it("merges overlapping batches from the stream and the polling fallback once per sequence, in order", () => {
    const a = [ev("RUN_CREATED"), ev("RUN_STARTED")];
    const b = [ev("STAGE_STARTED", { stage: "planning" }), ev("PLAN_CREATED", { version: 1 })];
    const merged = mergeEvents(mergeEvents(a, [a[1]!, b[0]!]), [b[1]!, b[0]!]);
    expect(merged.map((e) => e.sequence)).toEqual([a[0]!.sequence, a[1]!.sequence, b[0]!.sequence, b[1]!.sequence]);
  });

  it("says a decision was made from Slack or Telegram when chat_decisions holds it: by subject, or by time for a resume or cancel", () => {
    const people = { usr_1: "Ann", usr_2: "Bob" };
    const at = (s: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, s)).toISOString();
    const origins = [
      { subjectId: "gate_aaaaaaaaaaaa", action: "approve", provider: "slack" as const, userId: "usr_1", at: at(100) },
      { subjectId: "clr_bbbbbbbbbbbb", action: "answer", provider: "telegram" as const, userId: "usr_2", at: at(200) },
      { subjectId: "run_cccccccccccc", action: "retry", provider: "telegram" as const, userId: "usr_1", at: at(301) },
      { subjectId: "gate_dddddddddddd", action: "raise the budget", provider: "slack" as const, userId: "usr_2", at: at(400) },
    ];
    expect(describeEvent(ev("APPROVAL_GRANTED", { gateId: "gate_aaaaaaaaaaaa", by: "usr_1" }, 99), people, origins).detail).toBe("by Ann from Slack");
    expect(describeEvent(ev("CLARIFICATION_ANSWERED", { clarificationId: "clr_bbbbbbbbbbbb", by: "usr_2" }, 199), people, origins).detail).toBe("by Bob from Telegram");
    expect(describeEvent(ev("RUN_RESUMED", { by: "usr_1", action: "retry" }, 300), people, origins).detail).toBe("by Ann from Telegram");
    expect(describeEvent(ev("APPROVAL_GRANTED", { gateId: "gate_dddddddddddd", by: "usr_2", notes: "budget raised" }, 399), people, origins).detail).toBe("by Bob from Slack — budget raised");
    // From the dashboard: another gate, another person, or a resume long before the chat's.
    expect(describeEvent(ev("APPROVAL_GRANTED", { gateId: "gate_eeeeeeeeeeee", by: "usr_1" }, 99), people, origins).detail).toBe("by Ann");
    expect(describeEvent(ev("APPROVAL_REJECTED", { gateId: "gate_aaaaaaaaaaaa", by: "usr_2", feedback: "no" }, 99), people, origins).detail).toBe("by Bob — no");
    expect(describeEvent(ev("RUN_RESUMED", { by: "usr_1", action: "retry" }, 10), people, origins).detail).toBe("by Ann");
    expect(describeEvent(ev("RUN_RESUMED", { by: "usr_1" }, 300), people).detail).toBe("by Ann");
  });

  it("names a merge's commit by its short id, not the full 40 characters", () => {
    const sha = "1d42237c9a0b8e1f2a3b4c5d6e7f8091a2b3c4d5";
    expect(describeEvent(ev("PR_MERGED", { sha, by: "usr_1" }), { usr_1: "Owner" })).toMatchObject({ title: "Merged", detail: "by Owner — commit 1d42237" });
  });

  it("shows a run's set-up notes (a default model replaced for lack of its key) on its creation", () => {
    const note = 'The project\'s default modelRouting.planner: "deepseek:deepseek-reasoner" uses DeepSeek, which is not configured: set DEEPSEEK_API_KEY. The planner uses demo:default instead.';
    expect(describeEvent(ev("RUN_CREATED", { notes: [note] }))).toMatchObject({ title: "Run created, with notes", detail: note, tone: "warning" });
    expect(describeEvent(ev("RUN_CREATED"))).toMatchObject({ title: "Run created", tone: "info" });
  });

  it("shows per-task verification, the debug step's verdict and a summarised context on the timeline", () => {
    expect(describeEvent(ev("TASK_VERIFY_FAILED", { taskId: "T1", command: "sh test-add.sh", exitCode: 1, output: "x", attempt: 1 }))).toMatchObject({
      title: "Task T1 failed its check",
      detail: "`sh test-add.sh` exited 1",
      tone: "danger",
    });
    expect(describeEvent(ev("DEBUG_CLASSIFIED", { taskId: "T1", category: "test", action: "fix", reason: "add subtracts", attempt: 1, parsed: true }))).toMatchObject({
      title: "Debug: test failure in T1, fixing it",
      detail: "add subtracts",
    });
    expect(describeEvent(ev("DEBUG_CLASSIFIED", { taskId: "T1", category: "plan", action: "escalate", reason: "r", attempt: 1, parsed: true })).title).toBe(
      "Debug: plan failure in T1, escalating",
    );
    expect(describeEvent(ev("TASK_VERIFIED", { taskId: "T1", commands: ["sh test-add.sh"] }))).toMatchObject({ title: "Task T1 verified", tone: "success" });
    expect(describeEvent(ev("CONTEXT_SUMMARISED", { omittedMessages: 120, keptToolResults: 4, tokens: 5000, budget: 5600 })).title).toBe(
      "Conversation summarised to fit the context",
    );
  });

  it("describes events in words, with the question, feedback and pause reason a person needs", () => {
    expect(describeEvent(ev("CLARIFICATION_REQUESTED", { question: "Which database?" }))).toMatchObject({
      title: "Question asked",
      detail: "Which database?",
      tone: "waiting",
    });
    expect(describeEvent(ev("APPROVAL_REJECTED", { by: "ana", feedback: "split task 2" }))).toMatchObject({
      title: "Rejected",
      detail: "by ana — split task 2",
      tone: "danger",
    });
    expect(describeEvent(ev("RUN_PAUSED", { reason: "model_outage", message: "503 from provider" }))).toMatchObject({
      title: "Paused: model outage",
      detail: "503 from provider",
      tone: "warning",
    });
    expect(describeEvent(ev("TASK_STARTED", { taskId: "t2", index: 2, total: 3 })).title).toBe("Task 2 of 3 started");
  });

  it("tells a decision's deadline steps in words: reminder, timed out with what follows, escalated to whom, the default", () => {
    const subject = { type: "gate", id: "g1" };
    const people = { usr_b: "Backup" };
    expect(describeEvent(ev("DECISION_REMINDED", { subject, reminder: 0, deadline: Date.UTC(2025, 0, 1, 1) })).title).toBe("Reminder: the gate is still open");
    expect(describeEvent(ev("DECISION_REMINDED", { subject, reminder: 0, deadline: Date.UTC(2025, 0, 1, 1) })).detail).toBe("deadline 2025-01-01T01:00:00.000Z");
    const timedOut = describeEvent(ev("DECISION_TIMED_OUT", { subject: { type: "clarification", id: "c1" }, deadline: 1, action: "default" }));
    expect([timedOut.title, timedOut.detail, timedOut.tone]).toEqual(["Deadline passed on the question", "the default applies", "warning"]);
    expect(describeEvent(ev("DECISION_ESCALATED", { subject, to: { userId: "usr_b" }, recipients: ["usr_b"] }), people).detail).toBe("Backup may now decide");
    expect(describeEvent(ev("DECISION_ESCALATED", { subject, to: { role: "owner" }, recipients: [] })).detail).toBe("the project's owners may now decide");
    expect(describeEvent(ev("DECISION_DEFAULTED", { subject, answer: "approve" })).detail).toBe("approve");
    const outside = describeEvent(ev("DECISION_DEFAULTED", { subject, answer: "German", outsideOptions: true }));
    expect([outside.title, outside.detail, outside.tone]).toEqual(["The declared default applied (not one of the question's options)", "German", "warning"]);
  });

  it("names who decided instead of showing their user id", () => {
    const people = { usr_local_owner: "Owner" };
    expect(describeEvent(ev("APPROVAL_GRANTED", { by: "usr_local_owner" }), people).detail).toBe("by Owner");
    expect(describeEvent(ev("RUN_CANCELLED", { by: "usr_gone" }), people).detail).toBe("by usr_gone");
  });

  it("derives the running stage's progress: start time, attempt, task i of n, and none once it completes", () => {
    const stage = ev("STAGE_STARTED", { stage: "implementation", attempt: 2 });
    const events = [ev("RUN_STARTED"), stage, ev("TASK_STARTED", { taskId: "t1", index: 1, total: 3 }), ev("TASK_COMPLETED", { taskId: "t1" }), ev("TASK_STARTED", { taskId: "t2", index: 2, total: 3 })];
    expect(stageProgress(events)).toEqual({
      stage: "implementation",
      startedAt: stage.timestamp,
      attempt: 2,
      task: { taskId: "t2", index: 2, total: 3 },
      tasksCompleted: 1,
    });
    expect(stageProgress([...events, ev("STAGE_COMPLETED", { stage: "implementation" })])).toBeNull();
  });

  it("collects plan versions from PLAN_CREATED and PLAN_EDITED, with who edited and the feedback that led to a re-plan", () => {
    const events = [
      ev("PLAN_CREATED", { version: 1, plan: plan("flowchart TD\n  A-->B", ["one"]) }),
      ev("APPROVAL_REJECTED", { feedback: "add tests" }),
      ev("PLAN_CREATED", { version: 2, plan: plan("flowchart TD\n  A-->B-->C", ["one", "tests"]), feedback: "add tests" }),
      ev("PLAN_EDITED", { version: 3, by: "ana", plan: plan("flowchart TD\n  A-->C", ["one", "tests"]) }),
      ev("PLAN_CREATED", { version: 4 }),
    ];
    const versions = planVersions(events);
    expect(versions.map((v) => [v.version, v.source, v.by ?? null, v.feedback ?? null])).toEqual([
      [1, "planner", null, null],
      [2, "planner", null, "add tests"],
      [3, "edit", "ana", null],
    ]);
  });

  it("lists validation outcomes with report and score", () => {
    const results = validations([
      ev("VALIDATION_FAILED", { attempt: 1, score: 6, report: "## Findings\n- missing test" }),
      ev("VALIDATION_PASSED", { attempt: 2, score: 10, report: "All good" }),
    ]);
    expect(results.map((r) => [r.passed, r.attempt, r.score])).toEqual([
      [false, 1, 6],
      [true, 2, 10],
    ]);
    expect(results[0]!.report).toContain("missing test");
  });
});

describe("plan diff", () => {
  it("is a git-style unified diff showing the changed diagram line and the added task", () => {
    const diff = planDiff({
      from: plan("flowchart TD\n  A-->B", ["one"]),
      to: plan("flowchart TD\n  A-->C", ["one", "two"]),
      fromVersion: 1,
      toVersion: 2,
    });
    expect(diff.startsWith("diff --git a/plan-v1.md b/plan-v2.md\n--- a/plan-v1.md")).toBe(true);
    expect(diff).toContain("-  A-->B");
    expect(diff).toContain("+  A-->C");
    expect(diff).toContain("+- [t2] two");
    expect(hasChanges(diff)).toBe(true);
  });

  it("has no hunk for identical plans", () => {
    const p = plan("flowchart TD\n  A-->B", ["one"]);
    expect(hasChanges(planDiff({ from: p, to: p, fromVersion: 1, toVersion: 2 }))).toBe(false);
    expect(planToText(p)).toContain("- [t1] one");
  });
});

describe("runs list helpers", () => {
  it("turns a quick filter into the status list the API filters by", () => {
    expect(new URLSearchParams(runsQuery({ filter: "waiting", q: " hello ", projectId: "prj_1" })).get("status")).toBe(
      "awaiting_approval,awaiting_clarification,awaiting_fix_decision,paused",
    );
    expect(runsQuery({ filter: "all" })).toBe("");
    expect(runsQuery({ filter: "done", q: " x ", cursor: "abc", limit: 25 })).toBe("status=completed&q=x&cursor=abc&limit=25");
    expect(needsPerson("awaiting_fix_decision")).toBe(true);
    expect(needsPerson("running")).toBe(false);
  });

  it("formats durations and costs compactly", () => {
    expect(formatDuration(65_000)).toBe("1m 05s");
    expect(formatDuration(3 * 3_600_000 + 4 * 60_000)).toBe("3h 04m");
    expect(formatUsd(0)).toBe("$0");
    expect(formatUsd(0.00421)).toBe("$0.0042");
    expect(formatUsd(1.5)).toBe("$1.50");
  });
});

describe("taskTriage", () => {
  it("collects triage's verdict per task for the plan card", () => {
    const events = [
      ev("TASK_TRIAGED", { taskId: "T1", confidence: 0.9, evidence: ["`true` passes"], skipped: true }),
      ev("TASK_TRIAGED", { taskId: "T2", confidence: 0.3, evidence: [], skipped: false }),
      ev("TASK_COMPLETED", { taskId: "T2" }),
    ];
    expect(taskTriage(events)).toEqual({
      T1: { confidence: 0.9, evidence: ["`true` passes"], skipped: true },
      T2: { confidence: 0.3, evidence: [], skipped: false },
    });
    expect(describeEvent(events[0]!)).toMatchObject({ title: "Task already done (skipped)" });
  });
});
