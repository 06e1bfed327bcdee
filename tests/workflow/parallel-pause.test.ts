import { describe, expect, it } from "vitest";
import { POST as pauseRoute } from "@/app/api/runs/[id]/pause/route";
import { POST as resumeRoute } from "@/app/api/runs/[id]/resume/route";
import { autoPlanning, git, launch, newProject, postRunRoute, tasksRequest, until, useWorkflowHarness, waitForStatus } from "./harness";
import { eventsOf, expectCompleted, seqOf, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, item 4: "A pause stops at task boundaries." A person's pause asked for while parallel tasks run does not
 * cut a task short: the tasks under way finish their task and are merged, and the run pauses before the next task
 * starts. Resumed, the remaining tasks run.
 */

const h = useWorkflowHarness();

describe("a pause in a run of parallel tasks", () => {
  it("is honoured at the tasks' boundary: the task under way finishes and merges, the next task starts only after the resume", { timeout: 240_000 }, async () => {
    // T1's command waits until the test releases it (a ref in the repository, which the sandbox reads), so the pause
    // is asked for while T1 is in the middle of its task; T3 needs T1 and T2.
    const go = "refs/pause-test/go";
    const wait = `n=0; until git rev-parse -q --verify ${go} >/dev/null || test $n -ge 600; do sleep 0.1; n=$((n+1)); done; echo released >> alpha.txt`;
    const tasks = [
      "# Pause",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      `  [run: ${wait}]`,
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      "- [ ] T3: Write gamma (after T1, T2)",
      "  Files: gamma.txt",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Pause between tasks", tasks), {
      ...autoPlanning,
      limits: { maxConcurrentTasks: 3 },
    });
    const events = () => eventsOf(run.id);
    await until(async () => (await events()).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2"), "T2 to complete while T1's command is held", 120_000);
    expect((await events()).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1")).toBe(false);

    expect((await postRunRoute(pauseRoute, run.id, { note: "between tasks" })).status).toBe(202);
    git(repo, "update-ref", go, "HEAD");
    const parked = await waitForStatus(run.id, ["paused", "completed", "failed"], 120_000);
    expect(parked.status).toBe("paused");
    expect(parked.pauseReason).toMatchObject({ reason: "by_person", message: expect.stringContaining("between tasks") });
    const atPause = await events();
    // T1 was not cut short: it finished its task after the request, and was merged, before the run paused; T3 had not
    // begun.
    const requested = atPause.find((e) => e.type === "PAUSE_REQUESTED")!.sequence;
    const paused = atPause.find((e) => e.type === "RUN_PAUSED")!.sequence;
    expect(requested).toBeLessThan(seqOf(atPause, "TASK_COMPLETED", "T1"));
    expect(seqOf(atPause, "TASK_MERGED", "T1")).toBeLessThan(paused);
    expect(seqOf(atPause, "TASK_MERGED", "T2")).toBeLessThan(paused);
    expect(atPause.some((e) => taskOf(e) === "T3")).toBe(false);

    expect((await postRunRoute(resumeRoute, run.id)).status).toBe(200);
    const all = await expectCompleted(run.id, 120_000);
    const resumed = all.find((e) => e.type === "RUN_RESUMED")!.sequence;
    expect(seqOf(all, "TASK_BRANCH_CREATED", "T3")).toBeGreaterThan(resumed);
    expect(all.filter((e) => e.type === "RUN_PAUSED")).toHaveLength(1);
    expect(all.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha\nreleased");
    expect(git(repo, "show", `${run.branch}:gamma.txt`)).toBe("T3: Write gamma");
  });
});
