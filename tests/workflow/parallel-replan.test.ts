import { describe, expect, it } from "vitest";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { decisionKey } from "@/lib/runs/gates/acks";
import type { PlanDocument } from "@/lib/workflow";
import { getDb } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import * as decide from "@/inngest/decide";
import { announceDecision } from "@/inngest/announce";
import { inngest } from "@/inngest";
import { gateDecided, runCancelled } from "@/inngest/events";
import { autoPlanning, expectRunConsistent, fileBlock, git, launch, newProject, tasksRequest, until, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { type RunEvent, eventsOf, taskOf } from "./parallel-fixtures";

/**
 * A re-plan proposed from inside a parallel task (limits.maxConcurrentTasks) reaches the plan gate as a single
 * session's does, and the approved plan is the run's: the other tasks of the round work on meanwhile, and the rounds
 * go on with the new plan. So does a debug step's "the plan is wrong" on a task's failed check, and a task's question (the
 * debug step's or the implementer's) that a person sends back to planning.
 */

const h = useWorkflowHarness();

describe("re-plan from a parallel task", () => {
  it("a task's re-plan proposal goes to the plan gate while the other task finishes; approved, the new plan's tasks run and merge", { timeout: 240_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // The demo plans T1 (a.txt) and T2 (b.txt) side by side, then the note (T3); T1's session proposes the re-plan.
    const request = ["Two files [replan: The repository keeps a changelog that the plan forgot.]", "", fileBlock("a.txt", "alpha"), "", fileBlock("b.txt", "beta")].join("\n");
    const run = await launch(h.user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 3 } });

    await waitForStatus(run.id, ["awaiting_approval", "completed", "failed"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({
      version: 2,
      replan: expect.stringContaining("Re-plan proposed by the implementer (in task T1). Observation: The repository keeps a changelog that the plan forgot."),
    });
    expect((gate.context as { plan: PlanDocument }).plan.tasks.map((t) => t.id)).toEqual(["T1", "T2", "T3", "R1"]);
    // The other task of the round works on to its end while the gate waits.
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2"), "T2 to finish while the plan gate waits", 120_000);

    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 180_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];

    const plans = events.filter((e) => e.type === "PLAN_CREATED").map((e) => e.payload as { version: number; feedback: string | null });
    expect(plans.map((p) => p.version)).toEqual([1, 2]);
    expect(plans[1]!.feedback).toMatch(/^Re-plan proposed by the implementer \(in task T1\)/);
    // Not the fix gate: the only gate is the plan gate.
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind?: string }).kind ?? "plan")).toEqual(["plan"]);
    // T2 merged in the first round; T1 ran again under the new plan (its first session ended at the re-plan,
    // unmerged), and the new plan's task R1 ran and merged too. Every task completed once.
    const merged = events.filter((e) => e.type === "TASK_MERGED").map(taskOf);
    expect(merged[0]).toBe("T2");
    expect([...merged].sort()).toEqual(["R1", "T1", "T2", "T3"]);
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map(taskOf).sort()).toEqual(["R1", "T1", "T2", "T3"]);
    const t1 = events.filter((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T1").map((e) => (e.payload as { run: number }).run);
    expect(t1).toEqual([1, 2]);
    expect(git(repo, "show", `${run.branch}:a.txt`)).toBe("alpha");
    expect(git(repo, "show", `${run.branch}:b.txt`)).toBe("beta");
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });

  /**
   * T1's own check needs T2's file: in T1's worktree (cut before T2 merged) it fails, and the plan is what is wrong.
   * Once T2 is merged, T1 run again on top of it passes.
   */
  const debugRequest = (marker: string) =>
    [
      `Check needs the other task ${marker}`,
      "",
      "```tasks.md",
      "# Debug",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      "  Check: test -f beta.txt",
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      "```",
    ].join("\n");

  /** The plan gate approved; the run completes with T2 merged first, and T1 run again (its first session dropped) after it. */
  async function approveAndComplete(runId: string, gateId: string, repo: string, branch: string) {
    await approveGate({ user: h.user, runId, input: { gateId } });
    await announceDecision({ event: gateDecided.create({ runId, gateId, decision: "approve" }), key: decisionKey.gate(gateId) });
    expect((await waitForStatus(runId, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision", "awaiting_clarification"], 180_000)).status).toBe("completed");
    await waitForWorkflow(runId);
    const events = (await expectRunConsistent(runId)) as RunEvent[];
    expect(events.filter((e) => e.type === "PLAN_CREATED").map((e) => (e.payload as { version: number }).version)).toEqual([1, 2]);
    // Not the fix gate: the only gate is the plan gate.
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind?: string }).kind ?? "plan")).toEqual(["plan"]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T2", "T1"]);
    expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T1").map((e) => (e.payload as { run: number }).run)).toEqual([1, 2]);
    // T1's second run passed its check (beta.txt merged by then) without another debug step.
    expect(events.filter((e) => e.type === "TASK_VERIFIED").map(taskOf)).toEqual(["T1"]);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED")).toHaveLength(1);
    expect(git(repo, "show", `${branch}:alpha.txt`)).toBe("T1: Write alpha");
    expect(git(repo, "show", `${branch}:beta.txt`)).toBe("T2: Write beta");
    expect(git(repo, "branch", "--list", `${branch}--*`)).toBe("");
    return events;
  }

  it("a debug step's \"the plan is wrong\" on a task's failed check re-plans through the plan gate (not the fix gate); approved, the task runs afresh after the other task merged", { timeout: 240_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, debugRequest("[debug: plan]"), { ...autoPlanning, limits: { maxConcurrentTasks: 3, maxReplans: 1 } });

    await waitForStatus(run.id, ["awaiting_approval", "awaiting_fix_decision", "completed", "failed"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({
      version: 2,
      replan: expect.stringMatching(/^Re-plan proposed by the debug step \(in task T1\)\. Observation: task T1's acceptance command `test -f beta\.txt` failed and the failure is the plan's/),
    });
    // The other task of the round works on to its end while the gate waits.
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2"), "T2 to finish while the plan gate waits", 120_000);
    const events = await approveAndComplete(run.id, gate.id, repo, run.branch!);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED").map((e) => e.payload)).toMatchObject([{ taskId: "T1", category: "plan", action: "escalate" }]);
  });

  it("limits.maxReplans 0: the debug step's \"the plan is wrong\" in a task goes to the fix gate instead", { timeout: 180_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, debugRequest("[debug: plan]"), { ...autoPlanning, limits: { maxConcurrentTasks: 3, maxReplans: 0 } });
    await waitForStatus(run.id, ["awaiting_approval", "awaiting_fix_decision", "completed", "failed"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("fix");
    expect(gate.context).toMatchObject({ verification: { taskId: "T1", command: "test -f beta.txt", category: "plan" } });
    await cancelRun({ user: h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForWorkflow(run.id);
    expect((await eventsOf(run.id)).filter((e) => e.type === "PLAN_CREATED")).toHaveLength(1);
  });

  it("a debug step's question in a task, sent back to planning by a person, re-plans through the plan gate; approved, the task runs afresh", { timeout: 240_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // Sending back to planning is a person's choice: not counted in limits.maxReplans (0 here).
    const run = await launch(h.user, project.id, debugRequest("[debug: environment]"), { ...autoPlanning, limits: { maxConcurrentTasks: 3, maxReplans: 0 } });
    await waitForStatus(run.id, ["awaiting_clarification", "awaiting_approval", "awaiting_fix_decision", "completed", "failed"], 120_000);
    const db = await getDb();
    const question = await until(
      async () => (await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id))).find((c) => c.status === "pending"),
      "the debug step's question",
    );
    expect(question.question).toMatch(/^Demo: `test -f beta\.txt` needs something the sandbox lacks/);
    await decide.skip({ user: h.user, clarificationId: question.id, then: "planning" });

    const gate = await waitForPendingGate(run.id, 120_000);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({ version: 2, replan: `A person sent the run back to planning with the debug step's question (in task T1): ${question.question}` });
    const events = await approveAndComplete(run.id, gate.id, repo, run.branch!);
    expect(events.find((e) => e.type === "CLARIFICATION_IGNORED")!.payload).toMatchObject({ clarificationId: question.id, then: "planning" });
  });

  it("an implementer's question in a task, sent back to planning by a person, re-plans through the plan gate; approved, the task runs afresh and asks again", { timeout: 240_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // The demo asks the request's question in the plan's last task's session (T2); T1 works on meanwhile.
    const tasks = ["# Ask", "- [ ] T1: Write alpha", "  Files: alpha.txt", "- [ ] T2: Write beta", "  Files: beta.txt"].join("\n");
    const request = tasksRequest("Ask in parallel [ask: Which greeting? | Hello | Hi]", tasks);
    const run = await launch(h.user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 3 } });
    const db = await getDb();
    const pending = () =>
      until(async () => (await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id))).find((c) => c.status === "pending"), "a question", 120_000);
    const first = await pending();
    expect(first.question).toBe("Which greeting?");
    await decide.skip({ user: h.user, clarificationId: first.id, then: "planning" });

    const gate = await waitForPendingGate(run.id, 120_000);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({ version: 2, replan: "A person sent the run back to planning with the implementer's question (in task T2): Which greeting?" });
    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });

    // T2's session ended at the approved plan; its new session asks again, and the answer completes the run.
    const second = await pending();
    expect(second.id).not.toBe(first.id);
    await decide.answer({ user: h.user, clarificationId: second.id, response: "Hi" });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 180_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind?: string }).kind ?? "plan")).toEqual(["plan"]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
    expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T2").map((e) => (e.payload as { run: number }).run)).toEqual([1, 2]);
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta");
  });

  it("two tasks proposing a re-plan in the same round open ONE plan gate: the second joins it, its reason shown; deciding it changes the plan once and both tasks run afresh", { timeout: 300_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // Each task's own check needs the other's file: in its own worktree both fail, and the debug step blames the plan.
    const request = [
      "Both checks need the other task [debug: plan]",
      "",
      "```tasks.md",
      "# Both",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      "  Check: test -f beta.txt",
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      "  Check: test -f alpha.txt",
      "```",
    ].join("\n");
    // maxReplans 1: both proposals are answered by one gate, counted once (a second counted re-plan would be refused).
    const run = await launch(h.user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 3, maxReplans: 1 } });

    await waitForStatus(run.id, ["awaiting_approval", "awaiting_fix_decision", "completed", "failed"], 120_000);
    const first = await waitForPendingGate(run.id);
    expect(first.kind).toBe("plan");
    // The second task's proposal joins the open gate instead of drafting a plan and queueing a gate of its own.
    const proposals = await until(
      async () => {
        const found = (await eventsOf(run.id)).filter((e) => e.type === "REPLAN_PROPOSED");
        return found.length === 2 ? found.map((e) => e.payload as { taskId: string; outcome: string; reason: string }) : null;
      },
      "both tasks' re-plan proposals on record (one leading, one joining the gate)",
      120_000,
    );
    const lead = proposals.find((p) => p.outcome === "planning")!;
    const joined = proposals.find((p) => p.outcome === "joined")!;
    expect([lead?.taskId, joined?.taskId].sort()).toEqual(["T1", "T2"]);
    const db = await getDb();
    const [gate] = await db.select().from(gates).where(eq(gates.workflowRunId, run.id));
    expect(gate!.id).toBe(first.id);
    expect(gate!.context).toMatchObject({
      version: 2,
      replan: expect.stringContaining(`Re-plan proposed by the debug step (in task ${lead.taskId})`),
      joined: [{ taskId: joined.taskId, reason: expect.stringContaining(`Re-plan proposed by the debug step (in task ${joined.taskId})`) }],
    });
    // One gate at a time: nothing else waits, and only one plan was drafted.
    expect((await db.select().from(gates).where(eq(gates.workflowRunId, run.id))).length).toBe(1);

    // Approved with the checks taken out: both tasks run afresh under the new plan and pass.
    const plan = (gate!.context as { plan: PlanDocument }).plan;
    const tasks = plan.tasks.map(({ checks: _checks, ...t }) => t);
    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate!.id, editedPlan: { mermaid: plan.mermaid, tasks } } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate!.id, decision: "approve" }), key: decisionKey.gate(gate!.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision", "awaiting_clarification"], 180_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];

    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind?: string }).kind)).toEqual(["plan"]);
    // The plan changed once: the drafted re-plan (v2) and its edit (v3).
    expect(events.filter((e) => e.type === "PLAN_CREATED").map((e) => (e.payload as { version: number }).version)).toEqual([1, 2]);
    expect(events.filter((e) => e.type === "PLAN_EDITED").map((e) => (e.payload as { version: number }).version)).toEqual([3]);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED").map(taskOf).sort()).toEqual(["T1", "T2"]);
    expect(events.filter((e) => e.type === "REPLAN_PROPOSED")).toHaveLength(2);
    for (const id of ["T1", "T2"]) {
      expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === id).map((e) => (e.payload as { run: number }).run)).toEqual([1, 2]);
    }
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf).sort()).toEqual(["T1", "T2"]);
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha");
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta");
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });
});
