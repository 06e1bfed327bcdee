import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { costBreakdownForRun } from "@/lib/runs/costs";
import { stageSpend } from "@/lib/runs/budget";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { decisionKey } from "@/lib/runs/gates/acks";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { announceDecision } from "@/inngest/announce";
import { inngest } from "@/inngest";
import { clarificationAnswered, gateDecided, runCancelled } from "@/inngest/events";
import {
  autoPlanning,
  expectRunConsistent,
  git,
  launch,
  newProject,
  processesRunning,
  tasksRequest,
  until,
  useWorkflowHarness,
  waitForPendingGate,
  waitForStatus,
  waitForWorkflow,
} from "./harness";
import { type RunEvent, eventsOf, expectCompleted, seqOf, taskOf } from "./parallel-fixtures";

/**
 * Parallel tasks (limits.maxConcurrentTasks) through the real workflow on the embedded executor, in strict cloud mode:
 * a pasted tasks.md whose independent tasks run side by side, each on its own branch, merged in plan order.
 */

const h = useWorkflowHarness();

/** Three independent tasks, each writing its own file and running its own command, then one that needs all three. */
const TASKS = [
  "# Parallel",
  "- [ ] T1: Write alpha",
  "  Files: alpha.txt",
  "  [run: echo T1 ran >> alpha.txt]",
  "- [ ] T2: Write beta",
  "  Files: beta.txt",
  "  [run: echo T2 ran >> beta.txt]",
  "- [ ] T3: Write gamma",
  "  Files: gamma.txt",
  "  [run: echo T3 ran >> gamma.txt]",
  "- [ ] T4: Write the summary (after T1, T2, T3)",
  "  Files: summary.txt",
  "",
].join("\n");

const request = tasksRequest("Parallel tasks", TASKS);

describe("parallel tasks", () => {
  it("independent tasks run at once on their own branches; every task's work is merged into the run branch in plan order", { timeout: 180_000 }, async () => {
    expect(getEnv().GATEHOUSE_EXECUTOR_STRICT).toBe("cloud");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 3 } });
    const events = await expectCompleted(run.id, 180_000);

    // Each of T1–T3 started before any of them completed: they ran at the same time.
    const firstDone = Math.min(...["T1", "T2", "T3"].map((id) => seqOf(events, "TASK_COMPLETED", id)));
    for (const id of ["T1", "T2", "T3"]) expect(seqOf(events, "TASK_STARTED", id)).toBeLessThan(firstDone);
    // T4 waited for all three to be merged: its branch was cut after the last merge.
    const lastMerge = Math.max(...["T1", "T2", "T3"].map((id) => seqOf(events, "TASK_MERGED", id)));
    expect(seqOf(events, "TASK_BRANCH_CREATED", "T4")).toBeGreaterThan(lastMerge);

    // Own branches, cut from the run branch (T1–T3 from the same commit, in whatever order their steps ran); merges in
    // plan order, whatever order the tasks finished in.
    const branches = events.filter((e) => e.type === "TASK_BRANCH_CREATED").map((e) => e.payload as { taskId: string; branch: string; round: number; baseSha: string });
    expect(new Set(branches.filter((b) => b.round === 1).map((b) => b.baseSha)).size).toBe(1);
    expect(branches.map((b) => [b.taskId, b.branch, b.round]).sort()).toEqual([
      ["T1", `${run.branch}--T1`, 1],
      ["T2", `${run.branch}--T2`, 1],
      ["T3", `${run.branch}--T3`, 1],
      ["T4", `${run.branch}--T4`, 2],
    ]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2", "T3", "T4"]);
    expect(events.filter((e) => e.type === "IMPLEMENTATION_SUCCEEDED")).toHaveLength(1);

    // Every task's work (its Files: and its own [run:] command) is on the run branch, through two-parent merges.
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).toEqual(expect.arrayContaining(["alpha.txt", "beta.txt", "gamma.txt", "summary.txt"]));
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha\nT1 ran");
    expect(git(repo, "show", `${run.branch}:gamma.txt`)).toBe("T3: Write gamma\nT3 ran");
    expect(git(repo, "show", `${run.branch}:summary.txt`)).toBe("T4: Write the summary");
    const merges = git(repo, "log", "--merges", "--format=%s", run.branch!).split("\n").reverse();
    expect(merges).toEqual(["Merge task T1: Write alpha", "Merge task T2: Write beta", "Merge task T3: Write gamma", "Merge task T4: Write the summary"]);
    // Each task completed exactly once (each session did its own task only).
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map(taskOf).sort()).toEqual(["T1", "T2", "T3", "T4"]);
    // The tasks.md checkboxes are checked on the run branch as the tasks merge.
    expect(git(repo, "show", `${run.branch}:.autonomous/tasks.md`)).toBe(TASKS.replace(/- \[ \]/g, "- [x]").trimEnd());
    // A merged task's branch is deleted: only the run branch is left (its merges keep every task's commits).
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");

    // Each task's cost is its own session's model calls; together they are the implementation stage's spend, which
    // its budget checks.
    const { byTask, byStage } = await costBreakdownForRun({ runId: run.id });
    expect(byTask.map((t) => t.taskId)).toEqual(["T1", "T2", "T3", "T4"]);
    for (const t of byTask) expect(t.calls).toBeGreaterThan(0);
    const implementation = byStage.find((s) => s.stage === "implementation")!;
    const sum = (pick: (t: (typeof byTask)[number]) => number) => byTask.reduce((n, t) => n + pick(t), 0);
    expect(sum((t) => t.calls)).toBe(implementation.calls);
    expect(sum((t) => t.tokensIn + t.tokensOut)).toBe(implementation.tokensIn + implementation.tokensOut);
    expect(sum((t) => t.usd)).toBeCloseTo(implementation.usd, 9);
    expect((await stageSpend({ runId: run.id, stage: "implementation" })).tokens).toBe(implementation.tokensIn + implementation.tokensOut);
  });

  it("tasks do not advance in lockstep: a task finishes while another task's first command still runs", { timeout: 180_000 }, async () => {
    // T2's command waits until the test releases it (a ref the test creates in the repository, which the sandbox reads)
    // and writes whether it was released or gave up waiting. The test releases it only once T1 has completed, which
    // takes T1 two more turns after its command; in lockstep, T1's next turn would wait for T2's turn (its command).
    const go = "refs/lockstep-test/go";
    const wait = `n=0; until git rev-parse -q --verify ${go} >/dev/null || test $n -ge 300; do sleep 0.1; n=$((n+1)); done; if git rev-parse -q --verify ${go} >/dev/null; then echo released; else echo gave-up; fi >> beta.txt`;
    const tasks = ["# Pace", "- [ ] T1: Write alpha", "  Files: alpha.txt", "  [run: echo T1 ran >> alpha.txt]", "- [ ] T2: Write beta", "  Files: beta.txt", `  [run: ${wait}]`, ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Own pace", tasks), autoPlanning);
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1"), "T1 to complete", 120_000);
    git(repo, "update-ref", go, "HEAD");
    const events = await expectCompleted(run.id, 120_000);
    // T2's command ran on until the release, which came after T1 had completed (its turns after its own command).
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(seqOf(events, "TASK_COMPLETED", "T1")).toBeLessThan(seqOf(events, "TASK_COMPLETED", "T2"));
    const t1Done = events.find((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1")!.payload as { stepKey?: string };
    expect(t1Done.stepKey).toMatch(/^impl:1:task:T1:1:turn:[2-9]/);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
  });

  it("maxConcurrentTasks 1 keeps one session doing the tasks in plan order, on the run branch", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, request, { ...autoPlanning, limits: { maxConcurrentTasks: 1 } });
    const events = await expectCompleted(run.id, 180_000);
    const order = events.filter((e) => e.type === "TASK_STARTED" || e.type === "TASK_COMPLETED").map((e) => `${e.type === "TASK_STARTED" ? "start" : "done"} ${taskOf(e)}`);
    expect(order).toEqual(["start T1", "done T1", "start T2", "done T2", "start T3", "done T3", "start T4", "done T4"]);
    expect(events.some((e) => e.type === "TASK_BRANCH_CREATED" || e.type === "TASK_MERGED")).toBe(false);
    expect(events.filter((e) => e.type === "TASK_STARTED").every((e) => String((e.payload as { stepKey?: string }).stepKey).startsWith("impl:1:turn:"))).toBe(true);
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).toEqual(expect.arrayContaining(["alpha.txt", "beta.txt", "gamma.txt", "summary.txt"]));
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nT2 ran");
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });

  it("a task that conflicts runs once more on the merged branch; conflicting again, a conflict gate names the file and both sides, and a retry alone after the others merges it", { timeout: 240_000 }, async () => {
    // T1 and T3 write the same file in round 1 — T3 through its command, not its Files: (tasks that name a file in
    // common never run at once) — so T3 conflicts and runs again; in round 2 T2 (after T1) and T3's second run write it
    // again from the same starting point, and T2 merges first (plan order): T3 conflicts once more.
    const tasks = [
      "# Conflicts",
      "- [ ] T1: First word",
      "  Files: shared.txt",
      "- [ ] T2: Second word (after T1)",
      "  Files: shared.txt",
      "- [ ] T3: Third word",
      "  Files: third.txt",
      "  [run: echo Third > shared.txt]",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Conflicting tasks", tasks), autoPlanning);
    await waitForStatus(run.id, ["awaiting_approval", "completed", "failed", "awaiting_fix_decision"], 180_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("conflict");
    expect(gate.context).toMatchObject({
      taskId: "T3",
      branch: `${run.branch}--T3`,
      files: ["shared.txt"],
      sides: [{ path: "shared.txt", runBranch: "T2: Second word\n", task: "Third\n" }],
    });
    let events = await eventsOf(run.id);
    expect(events.filter((e) => e.type === "TASK_MERGE_CONFLICT").map((e) => [taskOf(e), (e.payload as { next: string }).next])).toEqual([
      ["T3", "rerun"],
      ["T3", "gate"],
    ]);

    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    events = (await expectRunConsistent(run.id)) as RunEvent[];
    // T3's third run was alone, on top of T1's and T2's merges; its work is what the file now says.
    const t3 = events.filter((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T3").map((e) => (e.payload as { run: number; round: number }));
    expect(t3.map((r) => [r.run, r.round])).toEqual([[1, 1], [2, 2], [3, 3]]);
    expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED" && (e.payload as { round: number }).round === 3).map(taskOf)).toEqual(["T3"]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:shared.txt`)).toBe("Third");
    expect(git(repo, "show", `${run.branch}:third.txt`)).toBe("T3: Third word");
    // Every task branch went once its task was merged (T3's after its third run).
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });

  it("cancel in the middle of parallel work stops every task's command and drops every task's sandbox", { timeout: 180_000 }, async () => {
    const sleepers = [["sleep", "471"], ["sleep", "472"], ["sleep", "473"]];
    const tasks = ["# Slow", ...sleepers.flatMap((cmd, i) => [`- [ ] T${i + 1}: Slow ${i + 1}`, `  Files: slow${i + 1}.txt`, `  [run: ${cmd.join(" ")}]`]), ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Slow tasks", tasks), autoPlanning);
    await until(async () => sleepers.every((cmd) => processesRunning(cmd).length > 0), "all three tasks' commands to run at once", 120_000);

    await cancelRun({ user: h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await until(async () => sleepers.every((cmd) => processesRunning(cmd).length === 0), "every task's command to be killed", 60_000);
    await waitForStatus(run.id, ["cancelled"]);
    await waitForWorkflow(run.id, 60_000);
    const workspaces = path.join(getEnv().dataDir, "workspaces");
    await until(async () => fs.readdirSync(workspaces).every((d) => !d.startsWith(run.id)), "every task's sandbox to be dropped", 60_000);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];
    expect(events.at(-1)!.type).toBe("RUN_CANCELLED");
    expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED")).toHaveLength(3);
    expect(events.some((e) => e.type === "TASK_COMPLETED" || e.type === "TASK_MERGED" || e.type === "IMPLEMENTATION_SUCCEEDED")).toBe(false);
    // The cancelled run's task branches are deleted with it (by the cancellation's clean-up); the run branch stays.
    await until(async () => git(repo, "branch", "--list", `${run.branch}--*`) === "", "every task branch to be deleted", 60_000);
    expect(git(repo, "branch", "--list", run.branch!)).toContain(run.branch!);
  });

  it("a question from one task does not stop the others: they finish while it waits, and its answer resumes it", { timeout: 180_000 }, async () => {
    // The demo asks the request's question in the plan's last task's session (T2); T1 works on meanwhile.
    const tasks = ["# Ask", "- [ ] T1: Write alpha", "  Files: alpha.txt", "- [ ] T2: Write beta", "  Files: beta.txt", ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const request = tasksRequest("Ask in parallel [ask: Which greeting? | Hello | Hi]", tasks);
    const run = await launch(h.user, project.id, request, autoPlanning);
    await waitForStatus(run.id, ["awaiting_clarification"], 120_000);
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1"), "T1 to finish while T2 waits", 120_000);
    const db = await getDb();
    const [question] = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id));
    expect(question).toMatchObject({ question: "Which greeting?", status: "pending" });
    await answerClarification({ user: h.user, clarificationId: question!.id, response: "Hi" });
    await announceDecision({ event: clarificationAnswered.create({ runId: run.id, clarificationId: question!.id }), key: decisionKey.clarification(question!.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];
    const asked = events.find((e) => e.type === "CLARIFICATION_REQUESTED")!.sequence;
    const answered = events.find((e) => e.type === "CLARIFICATION_ANSWERED")!.sequence;
    const t1Done = seqOf(events, "TASK_COMPLETED", "T1");
    expect(asked).toBeLessThan(t1Done);
    expect(t1Done).toBeLessThan(answered);
    expect((events.find((e) => e.type === "CLARIFICATION_REQUESTED")!.payload as { stepKey: string }).stepKey).toMatch(/^impl:1:task:T2:1:turn:0:q:ask/);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta");
  });
});
