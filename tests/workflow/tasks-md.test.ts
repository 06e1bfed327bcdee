import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createProject } from "@/lib/projects/queries";
import type { PlanDocument } from "@/lib/workflow";
import { startRun } from "@/lib/runs/service";
import { autoPlanning, expectRunConsistent, fileBlock, git, launch, makeRepo, newProject, tasksRequest, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

/** Runs whose plan is a tasks.md (pasted into the request, or in the repository), through the real workflow. */

const h = useWorkflowHarness();

const TASKS = [
  "# Farewell",
  "- [x] T1: Write the greeting",
  "  Files: greet.txt",
  "- [ ] T2: Write the farewell (after T1)",
  "  Files: bye.txt",
  "  Check: test -f bye.txt",
  "- [ ] T3: Document it (after T2)",
  "  Files: docs/requests/tasks-run.md",
  "",
].join("\n");

function planOf(events: Array<{ type: string; payload: unknown }>): PlanDocument {
  return (events.find((e) => e.type === "PLAN_CREATED")!.payload as { plan: PlanDocument }).plan;
}

describe("tasks.md runs", () => {
  it("a pasted tasks.md is the plan: the checked task is skipped, each finished task's checkbox is committed", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const request = tasksRequest("Tasks run", TASKS, fileBlock("bye.txt", "bye"));
    const run = await launch(h.user, project.id, request, autoPlanning);
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);

    const events = await expectRunConsistent(run.id);
    const plan = planOf(events);
    expect(plan.tasks.map((t) => [t.id, t.dependsOn])).toEqual([["T2", []], ["T3", ["T2"]]]);
    expect(plan.skipped).toEqual([{ id: "T1", title: "Write the greeting", reason: "checked in .autonomous/tasks.md" }]);
    expect(plan.acceptanceCriteria).toEqual([{ id: "T2.1", description: "T2: `test -f bye.txt` succeeds", command: "test -f bye.txt" }]);
    expect(events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T2", "T3"]);

    // The skipped task was never implemented; the finished ones are checked on the branch, each in its own commit.
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).toContain("bye.txt");
    expect(files).not.toContain("greet.txt");
    const final = git(repo, "show", `${run.branch}:.autonomous/tasks.md`);
    expect(final).toContain("- [x] T1: Write the greeting");
    expect(final).toContain("- [x] T2: Write the farewell (after T1)");
    expect(final).toContain("- [x] T3: Document it (after T2)");
    const subjects = git(repo, "log", "--format=%s", run.branch!).split("\n");
    expect(subjects).toEqual(expect.arrayContaining([`.autonomous/tasks.md: T2 done (run ${run.id})`, `.autonomous/tasks.md: T3 done (run ${run.id})`]));
    // T2's checkbox was committed after T2's checkpoint and before T3's.
    const t2 = subjects.indexOf(`.autonomous/tasks.md: T2 done (run ${run.id})`);
    expect(subjects.findIndex((s) => s.startsWith("Task T3:"))).toBeLessThan(t2);
    expect(subjects.findIndex((s) => s.startsWith("Task T2:"))).toBeGreaterThan(t2);
  });

  it("with tasks.source \"repository\", the repository's tasks.md is the plan and its checkboxes are committed in place", { timeout: 120_000 }, async () => {
    const repo = makeRepo();
    fs.writeFileSync(path.join(repo, "tasks.md"), TASKS);
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "tasks");
    const project = await createProject({ name: "tasks", ownerId: h.user.id, repository: { type: "local", path: repo } });
    const run = await launch(h.user, project.id, ["Tasks run", fileBlock("bye.txt", "bye")].join("\n"), { ...autoPlanning, tasks: { source: "repository" } });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(planOf(events).tasksFile).toEqual({ path: "tasks.md" });
    expect(git(repo, "show", `${run.branch}:tasks.md`)).toBe(TASKS.replace(/- \[ \]/g, "- [x]").trimEnd());
    expect(git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n")).not.toContain("greet.txt");
  });

  it("a malformed pasted tasks.md is refused when the run is created (400, naming the line)", async () => {
    const { project } = await newProject(h.user);
    const request = "Broken\n```tasks.md\n- [ ] A: a (after B)\n```\n";
    await expect(startRun({ user: h.user, projectId: project.id, request })).rejects.toMatchObject({
      status: 400,
      message: "tasks.md: line 1: A depends on B, which is not a task here.",
    });
  });
});
