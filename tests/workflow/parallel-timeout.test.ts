import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { workflowClock } from "@/lib/runs/steps/context";
import { taskSandboxId } from "@/lib/runs/steps/workspace";
import { resumeRun } from "@/lib/runs/gates/decide-run";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { runResumed } from "@/inngest/events";
import { autoPlanning, git, launch, newProject, processesRunning, tasksRequest, until, useWorkflowHarness, waitForStatus } from "./harness";
import { eventsOf, expectCompleted, heldUntilRef, seqOf, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, item 4: "The stage timeout covers all tasks." timeoutMinutes.implementation counts the implementation
 * stage's working time, whichever task is at work: a lane's second task carries the lane's (the stage's) working
 * stretch on, it does not start a window of its own. Through the real workflow on the embedded executor, in strict
 * cloud mode; the workflow's clock (workflowClock, what every step's time and deadline is read from) is moved on by the
 * test, so no test waits minutes.
 */

const h = useWorkflowHarness();
const realNow = workflowClock.now;
afterEach(() => {
  workflowClock.now = realNow;
});

// T3's command's nap (heldUntilRef): a number no other command uses, so the test can see it running.
const T3_NAP = "0.1037";

const MINUTE = 60_000;

describe("the implementation stage's timeout with parallel tasks in lanes", () => {
  it("covers a lane's second task: begun 6 of 10 minutes into the stage, its command is stopped at 12 (not 16), the run pauses once, and extend completes it", { timeout: 300_000 }, async () => {
    // Limit 2, three independent tasks: lanes [T1, T3] and [T2]. T1's command holds T1 (and so T3) until the test has
    // moved the clock 6 minutes on; T3's command holds T3 until the test has moved it 12 minutes on: past the stage's
    // 10 minutes, though only about 6 into T3's own time.
    const go1 = "refs/timeout-test/go1";
    const go3 = "refs/timeout-test/go3";
    const tasks = [
      "# Timeout in lanes",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      `  [run: ${heldUntilRef(go1, "alpha.txt", 150)}]`,
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      "- [ ] T3: Write gamma",
      "  Files: gamma.txt",
      `  [run: ${heldUntilRef(go3, "gamma.txt", 300, T3_NAP)}]`,
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Timeout lanes", tasks), {
      ...autoPlanning,
      limits: { maxConcurrentTasks: 2 },
      timeoutMinutes: { implementation: 10 },
    });
    // T2's session ended (completed, its sandbox released) within the stage's first minutes; T1 waits on its command.
    const workspaces = path.join(getEnv().dataDir, "workspaces");
    await until(
      async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2") && !fs.readdirSync(workspaces).includes(taskSandboxId(run.id, "T2")),
      "T2's session to end",
      120_000,
    );
    expect((await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1")).toBe(false);

    // 6 minutes into the stage: T1 finishes, and its lane begins T3.
    workflowClock.now = () => Date.now() + 6 * MINUTE;
    git(repo, "update-ref", go1, "HEAD");
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_STARTED" && taskOf(e) === "T3"), "T3 to start", 120_000);
    await until(async () => processesRunning(["sleep", T3_NAP]).length > 0, "T3's command to run", 120_000);

    // 12 minutes into the stage (about 6 into T3's own time): the stage has run over.
    workflowClock.now = () => Date.now() + 12 * MINUTE;
    const paused = await waitForStatus(run.id, ["paused", "completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "implementation" });
    expect(paused.pauseReason?.message).toContain("10 minutes");
    let events = await eventsOf(run.id);
    // T3 — the lane's second task, in the same round — was stopped by the stage's deadline: its own task opened the pause.
    const t3Branch = events.find((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T3")!;
    expect((t3Branch.payload as { round: number }).round).toBe(1);
    expect(seqOf(events, "TASK_COMPLETED", "T1")).toBeLessThan(t3Branch.sequence);
    expect(events.some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T3")).toBe(false);
    const pauses = events.filter((e) => e.type === "RUN_PAUSED");
    expect(pauses).toHaveLength(1);
    expect((pauses[0]!.payload as { stepKey: string }).stepKey).toMatch(/^impl:1:task:T3:1:turn:\d+:timeout:pause$/);
    expect(seqOf(events, "TASK_STARTED", "T3")).toBeLessThan(pauses[0]!.sequence);

    // Extended: T3 goes on and the run completes, with no second pause. Its command was stopped at the deadline (as a
    // command over the stage's time is): it wrote nothing, neither "released" (the ref is there from now on) nor
    // "gave-up"; the implementer saw it time out and went on.
    git(repo, "update-ref", go3, "HEAD");
    const resumed = await resumeRun({ user: h.user, runId: run.id, action: "extend" });
    await announceDecision({ event: runResumed.create({ runId: run.id, action: "extend" }), key: decisionKey.resume(resumed.lastSequence) });
    events = await expectCompleted(run.id, 180_000);
    expect(events.filter((e) => e.type === "RUN_PAUSED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "RUN_RESUMED").map((e) => (e.payload as { action: string }).action)).toEqual(["extend"]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha\nreleased");
    expect(git(repo, "show", `${run.branch}:gamma.txt`)).toBe("T3: Write gamma");
  });
  it("two lanes over the stage's time together pause the run once: one extend covers every task, and the run completes", { timeout: 300_000 }, async () => {
    // Limit 2, two independent tasks, each holding its lane with a command until the test creates its ref. Both
    // commands run when the clock passes the stage's 10 minutes: both tasks are over, the run pauses once.
    const go = "refs/timeout-test/go-both";
    const nap = (n: string) => heldUntilRef(go, n === "1" ? "alpha.txt" : "beta.txt", 300, `0.10${n}9`);
    const tasks = [
      "# Both over",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      `  [run: ${nap("1")}]`,
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      `  [run: ${nap("2")}]`,
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Timeout both", tasks), {
      ...autoPlanning,
      limits: { maxConcurrentTasks: 2 },
      timeoutMinutes: { implementation: 10 },
    });
    await until(async () => processesRunning(["sleep", "0.1019"]).length > 0 && processesRunning(["sleep", "0.1029"]).length > 0, "both tasks' commands to run", 120_000);

    workflowClock.now = () => Date.now() + 12 * MINUTE;
    const paused = await waitForStatus(run.id, ["paused", "completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "implementation" });
    // Both tasks' commands were stopped at the stage's deadline before the person extends.
    await until(async () => processesRunning(["sleep", "0.1019"]).length === 0 && processesRunning(["sleep", "0.1029"]).length === 0, "both commands to stop", 120_000);

    git(repo, "update-ref", go, "HEAD");
    const resumed = await resumeRun({ user: h.user, runId: run.id, action: "extend" });
    await announceDecision({ event: runResumed.create({ runId: run.id, action: "extend" }), key: decisionKey.resume(resumed.lastSequence) });
    const events = await expectCompleted(run.id, 180_000);
    const pauses = events.filter((e) => e.type === "RUN_PAUSED");
    expect(pauses).toHaveLength(1);
    expect((pauses[0]!.payload as { stepKey: string }).stepKey).toMatch(/^impl:1:task:T[12]:1:turn:\d+:timeout:pause$/);
    expect(events.filter((e) => e.type === "RUN_RESUMED").map((e) => (e.payload as { action: string }).action)).toEqual(["extend"]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
  });
});
