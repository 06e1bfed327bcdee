import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { laneSandboxId } from "@/lib/runs/steps/workspace";
import { requestPause, resumeRun } from "@/lib/runs/gates/decide-run";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { runResumed } from "@/inngest/events";
import { autoPlanning, git, launch, newProject, tasksRequest, until, useWorkflowHarness, waitForStatus } from "./harness";
import { eventsOf, expectCompleted, heldUntilRef, replanWhileLaneRuns, seqOf, taskOf } from "./parallel-fixtures";

/**
 * Parallel tasks in lanes (inngest/run/tasks.ts): a round takes every ready task and deals them into
 * limits.maxConcurrentTasks lanes; a lane runs its tasks one after another, with no barrier between the lanes inside
 * the round. Through the real workflow on the embedded executor, in strict cloud mode.
 */

const h = useWorkflowHarness();

/**
 * A `[run: …]` command that waits until the test creates `ref` in the repository (the sandbox reads it), then writes
 * whether it was released or gave up waiting (after about `seconds`) into `file`.
 */
describe("parallel tasks in lanes", () => {
  it("a lane starts its next task as soon as its own task ends, while another lane's first task still runs", { timeout: 180_000 }, async () => {
    // Limit 2, three independent tasks: lanes [T1, T3] and [T2]. T2's command is released only once T3 has started,
    // which in rounds of `limit` tasks (T1 and T2, then T3) never happens before T2 ends.
    const go = "refs/lanes-test/go";
    const tasks = [
      "# Lanes",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      `  [run: ${heldUntilRef(go, "beta.txt")}]`,
      "- [ ] T3: Write gamma",
      "  Files: gamma.txt",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Lanes", tasks), { ...autoPlanning, limits: { maxConcurrentTasks: 2 } });
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_STARTED" && taskOf(e) === "T3"), "T3 to start", 120_000);
    // A lane holds one sandbox: T3 works in the one T1 worked in, handed on; T2's lane has its own, its command waiting.
    const workspaces = fs.readdirSync(path.join(getEnv().dataDir, "workspaces"));
    const taskDirs = workspaces.filter((w) => (w.startsWith(`${run.id}_`) || w.startsWith(`${run.id}--`)) && !w.endsWith(".home"));
    expect(taskDirs.sort()).toEqual([laneSandboxId(run.id, 1, 1), laneSandboxId(run.id, 1, 2)]);
    git(repo, "update-ref", go, "HEAD");
    const events = await expectCompleted(run.id, 120_000);

    // T2's command was released by T3's start: T3 (T1's lane) began before T2 (the other lane) completed.
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(seqOf(events, "TASK_COMPLETED", "T1")).toBeLessThan(seqOf(events, "TASK_BRANCH_CREATED", "T3"));
    expect(seqOf(events, "TASK_STARTED", "T3")).toBeLessThan(seqOf(events, "TASK_COMPLETED", "T2"));
    // One round: every branch cut from the run branch (T3's before or after T1's merge), the merges in plan order as
    // the tasks ended (the first merge step starts from T1; tests/workflow/parallel-merge-early.test.ts).
    const branches = events.filter((e) => e.type === "TASK_BRANCH_CREATED").map((e) => e.payload as { taskId: string; round: number; baseSha: string });
    expect(branches.map((b) => [b.taskId, b.round]).sort()).toEqual([
      ["T1", 1],
      ["T2", 1],
      ["T3", 1],
    ]);
    const firstParents = git(repo, "log", "--first-parent", "--format=%H", run.branch!).split("\n");
    for (const b of branches) expect(firstParents).toContain(b.baseSha);
    const merged = events.filter((e) => e.type === "TASK_MERGED");
    expect(merged.map(taskOf)).toEqual(["T1", "T2", "T3"]);
    expect((merged[0]!.payload as { stepKey: string }).stepKey).toBe("impl:1:round:1:merge:from:T1");
    expect(git(repo, "show", `${run.branch}:gamma.txt`)).toBe("T3: Write gamma");
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });

  it("a pause asked for while the lanes run: a lane takes no next task, the round merges what finished, and the pause opens before the rest", { timeout: 240_000 }, async () => {
    // Lanes [T1, T3] and [T2]. The pause is asked for while T1 and T2 wait on their commands; T1 then ends first, and
    // its lane must not take T3.
    const go1 = "refs/lanes-test/go1";
    const go2 = "refs/lanes-test/go2";
    const tasks = [
      "# Pause in lanes",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      `  [run: ${heldUntilRef(go1, "alpha.txt")}]`,
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      `  [run: ${heldUntilRef(go2, "beta.txt")}]`,
      "- [ ] T3: Write gamma",
      "  Files: gamma.txt",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Pause lanes", tasks), { ...autoPlanning, limits: { maxConcurrentTasks: 2 } });
    await until(async () => {
      const events = await eventsOf(run.id);
      return ["T1", "T2"].every((id) => events.some((e) => e.type === "TASK_STARTED" && taskOf(e) === id));
    }, "T1 and T2 to start", 120_000);
    await requestPause({ user: h.user, runId: run.id, note: "lunch" });
    git(repo, "update-ref", go1, "HEAD");
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1"), "T1 to complete", 120_000);
    git(repo, "update-ref", go2, "HEAD");
    expect((await waitForStatus(run.id, ["paused", "completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("paused");
    let events = await eventsOf(run.id);
    // T3 was not begun: T1's lane stopped at its task boundary; T1 and T2 merged, then the run paused between rounds.
    expect(events.some((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T3")).toBe(false);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
    const paused = events.filter((e) => e.type === "RUN_PAUSED");
    expect(paused.map((e) => (e.payload as { reason: string }).reason)).toEqual(["by_person"]);
    expect(paused[0]!.sequence).toBeGreaterThan(seqOf(events, "TASK_MERGED", "T2"));

    const resumed = await resumeRun({ user: h.user, runId: run.id, action: "retry" });
    await announceDecision({ event: runResumed.create({ runId: run.id, action: "retry" }), key: decisionKey.resume(resumed.lastSequence) });
    events = await expectCompleted(run.id, 120_000);
    // T3 ran in the next round, after the pause, on top of T1's and T2's merges.
    const t3 = events.find((e) => e.type === "TASK_BRANCH_CREATED" && taskOf(e) === "T3")!;
    expect((t3.payload as { round: number; run: number })).toMatchObject({ round: 2, run: 1 });
    expect(t3.sequence).toBeGreaterThan(events.find((e) => e.type === "RUN_RESUMED")!.sequence);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha\nreleased");
    expect(git(repo, "show", `${run.branch}:gamma.txt`)).toBe("T3: Write gamma");
  });

  it("an approved re-plan in one lane: the other lane takes no further task of the old plan; the next round follows the new one", { timeout: 240_000 }, async () => {
    // Lanes [T1, T3] and [T2, T4]. T1's session proposes a re-plan at once; T2's command waits until the re-plan is
    // approved (T1 then takes one step to end its session, T2 three more turns to its boundary), so T2 ends under the
    // new plan: its lane must not take T4 of the old one.
    const { run, repo, events, approved, branches } = await replanWhileLaneRuns(h.user, "refs/lanes-test/go");
    // Round 1 began T1 and T2 only: T2's lane ended at T2 (the plan had changed), T1's at T1's re-plan.
    expect(branches.filter((b) => b.round === 1).map((b) => b.taskId).sort()).toEqual(["T1", "T2"]);
    // T3 and T4 began in a later round, after the approval, under the new plan; T1 ran again there.
    for (const id of ["T3", "T4"]) {
      const b = branches.find((x) => x.taskId === id)!;
      expect(b.round).toBeGreaterThan(1);
      expect(b.sequence).toBeGreaterThan(approved);
    }
    expect(branches.filter((b) => b.taskId === "T1").map((b) => b.run)).toEqual([1, 2]);
    expect(seqOf(events, "TASK_COMPLETED", "T2")).toBeGreaterThan(approved);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)[0]).toBe("T2");
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(git(repo, "show", `${run.branch}:delta.txt`)).toBe("T4: Write delta");
  });
});
