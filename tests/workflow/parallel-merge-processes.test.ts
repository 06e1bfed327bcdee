import { AsyncLocalStorage } from "node:async_hooks";
import { describe, expect, it, vi } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { git, launch, newProject, tasksRequest, useWorkflowHarness, waitForStatus } from "./harness";
import { THREE_TASKS } from "./parallel-fixtures";

/**
 * The merge steps of parallel tasks (lib/runs/steps/tasks.ts mergeTasks) sit on the run's critical path: the round's
 * last tasks wait for one. A step used to run about seven git processes per task one after another (resolve both tips,
 * an ancestry check, merge-tree, commit-tree, a ref move, then the tasks.md commit with its own ten): now two per task
 * (merge-tree, commit-tree), and the run branch moved once per step, tasks.md commit included. The round's tasks merge
 * as they end (one step or several, by how they end), in plan order.
 */

/** Each merge step's tasks and the git commands it spawned. */
type Call = { tasks: string[]; commands: string[][] };
const inMerge = vi.hoisted(() => ({ storage: null as null | import("node:async_hooks").AsyncLocalStorage<Call>, calls: [] as Call[] }));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("../git/spawn-record");
  return recordingSpawner(await importOriginal(), (request) => {
    // Only what a merge step itself spawns (its async context), not the other runs' or steps' work.
    inMerge.storage?.getStore()?.commands.push(commandOf(request));
  });
});
vi.mock("@/lib/runs/steps/tasks", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/tasks")>();
  return {
    ...original,
    mergeTasks: (input: Parameters<typeof original.mergeTasks>[0]) => {
      const call: Call = { tasks: input.tasks.map((t) => t.taskId), commands: [] };
      inMerge.calls.push(call);
      return inMerge.storage!.run(call, () => original.mergeTasks(input));
    },
  };
});
inMerge.storage = new AsyncLocalStorage<Call>();

const h = useWorkflowHarness();

describe("merging a round of parallel tasks", () => {
  it("runs two git processes per task and moves the run branch once, its tasks.md commit included", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Three at once", THREE_TASKS), { trustMode: { planning: "auto" } });
    expect((await waitForStatus(run.id, ["completed", "failed"], 120_000)).status).toBe("completed");
    const events = await listEvents({ runId: run.id, limit: 1000 });
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1", "T2", "T3"]);
    // Merged in plan order, then the boxes checked in one commit on top.
    const subjects = git(repo, "log", "--first-parent", "--format=%s", `main..${run.branch}`).split("\n");
    const merges = subjects.filter((s) => s.startsWith("Merge task ")).reverse();
    expect(merges).toEqual(["Merge task T1: Write one", "Merge task T2: Write two", "Merge task T3: Write three"]);
    expect(git(repo, "show", `${run.branch}:.autonomous/tasks.md`)).toBe(THREE_TASKS.replace(/- \[ \]/g, "- [x]").trimEnd());

    // Every task merged once, in plan order, by the steps together.
    expect(inMerge.calls.flatMap((c) => c.tasks)).toEqual(["T1", "T2", "T3"]);
    for (const { tasks, commands } of inMerge.calls) {
      const gits = commands.filter((c) => c[0] === "git").map((c) => c.slice(1));
      const named = (name: string) => gits.filter((c) => c.includes(name));
      expect(named("merge-tree")).toHaveLength(tasks.length);
      // Its merge commits and its tasks.md commit.
      expect(named("commit-tree")).toHaveLength(tasks.length + 1);
      // The run branch moved once, by compare-and-swap (the merged task branches' deletion is one more process at most).
      const moves = named("update-ref").filter((c) => c.includes(`refs/heads/${run.branch}`));
      expect(moves).toHaveLength(1);
      expect(moves[0]).toHaveLength(4);
      expect(named("update-ref").length).toBeLessThanOrEqual(2);
      // No tip resolved one ref at a time, no ancestry check per task, no task's sandbox (nor its config) read.
      expect(named("rev-parse")).toHaveLength(0);
      expect(named("merge-base")).toHaveLength(0);
      expect(named("worktree")).toHaveLength(0);
      // Was 37 for three tasks: seven per task, ten for tasks.md, a config read, a prune and a deletion per task.
      expect(gits.length).toBeLessThanOrEqual(2 * tasks.length + 11);
    }
  });
});
