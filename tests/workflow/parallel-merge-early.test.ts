import { describe, expect, it } from "vitest";
import { autoPlanning, git, launch, newProject, tasksRequest, until, useWorkflowHarness } from "./harness";
import { type RunEvent, eventsOf, expectCompleted, heldUntilRef, seqOf, taskOf } from "./parallel-fixtures";

/**
 * A round's merges as its tasks end (inngest/run/tasks.ts mergeAsTheyEnd): a finished task is merged into the run
 * branch while other tasks still run — once every task before it in plan order is merged — so the round's end merges
 * only its last tasks; and the order stays the plan's, whatever order the tasks end in. Through the real workflow on
 * the embedded executor, in strict cloud mode.
 */

const h = useWorkflowHarness();

const seen = (events: RunEvent[], type: string, taskId: string) => events.some((e) => e.type === type && taskOf(e) === taskId);

/**
 * A `[run: …]` command that waits until the test creates `ref` in the repository (the sandbox reads it), then writes
 * whether it was released or gave up waiting (after about `seconds`) into `file`.
 */
describe("a round's merges as its tasks end", () => {
  it("a finished task is merged into the run branch while another task of the round still runs", { timeout: 180_000 }, async () => {
    // Limit 2: T1 and T2 at once. T2's command is released only once the test has seen T1 merged, which, when the round
    // merges only after its last task, never happens before T2 ends (T2 gives up waiting).
    const go = "refs/merge-early-test/go";
    const tasks = ["# Early", "- [ ] T1: Write alpha", "  Files: alpha.txt", "- [ ] T2: Write beta", "  Files: beta.txt", `  [run: ${heldUntilRef(go, "beta.txt")}]`, ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Early", tasks), { ...autoPlanning, limits: { maxConcurrentTasks: 2 } });
    await until(async () => seen(await eventsOf(run.id), "TASK_MERGED", "T1"), "T1 to be merged", 120_000);
    // T1's work is on the run branch already, its box checked on top of its merge; T2's is not.
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha");
    expect(git(repo, "show", `${run.branch}:.autonomous/tasks.md`)).toContain("- [x] T1: Write alpha");
    expect(git(repo, "show", `${run.branch}:.autonomous/tasks.md`)).toContain("- [ ] T2: Write beta");
    git(repo, "update-ref", go, "HEAD");
    const events = await expectCompleted(run.id, 120_000);

    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(seqOf(events, "TASK_MERGED", "T1")).toBeLessThan(seqOf(events, "TASK_COMPLETED", "T2"));
    // Two merge steps: T1's, then T2's; each its own merge commit, then its box checked; the run branch's history in
    // plan order.
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => (e.payload as { stepKey: string }).stepKey)).toEqual([
      "impl:1:round:1:merge:from:T1",
      "impl:1:round:1:merge:from:T2",
    ]);
    const merges = git(repo, "log", "--first-parent", "--merges", "--format=%s", run.branch!).split("\n").reverse();
    expect(merges).toEqual(["Merge task T1: Write alpha", "Merge task T2: Write beta"]);
    expect(git(repo, "show", `${run.branch}:.autonomous/tasks.md`)).toBe(tasks.replace(/- \[ \]/g, "- [x]").trimEnd());
    // No task branch is left (T2's deleted by its merge step, or — its worktree still going then — as the attempt ended).
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });

  it("tasks that end before an earlier task of the plan wait for it: the merges stay in plan order", { timeout: 180_000 }, async () => {
    // Limit 3: T1's command is released only once T2 and T3 have completed, so T1 ends last.
    const go = "refs/merge-early-test/order";
    const tasks = [
      "# Order",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      `  [run: ${heldUntilRef(go, "alpha.txt")}]`,
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      "- [ ] T3: Write gamma",
      "  Files: gamma.txt",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Order", tasks), { ...autoPlanning, limits: { maxConcurrentTasks: 3 } });
    await until(async () => {
      const events = await eventsOf(run.id);
      return seen(events, "TASK_COMPLETED", "T2") && seen(events, "TASK_COMPLETED", "T3");
    }, "T2 and T3 to complete", 120_000);
    // Nothing merged before T1, the first task of the plan, ended.
    expect((await eventsOf(run.id)).filter((e) => e.type === "TASK_MERGED")).toEqual([]);
    git(repo, "update-ref", go, "HEAD");
    const events = await expectCompleted(run.id, 120_000);

    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha\nreleased");
    const merged = events.filter((e) => e.type === "TASK_MERGED");
    expect(merged.map(taskOf)).toEqual(["T1", "T2", "T3"]);
    for (const e of merged) expect(e.sequence).toBeGreaterThan(seqOf(events, "TASK_COMPLETED", "T1"));
    const merges = git(repo, "log", "--first-parent", "--merges", "--format=%s", run.branch!).split("\n").reverse();
    expect(merges).toEqual(["Merge task T1: Write alpha", "Merge task T2: Write beta", "Merge task T3: Write gamma"]);
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });
});
