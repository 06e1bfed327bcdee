import { describe, expect, it, vi } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { expectRunConsistent, git, newProject, useWorkflowHarness, waitForWorkflow } from "./harness";
import { completedInTwoLanes } from "./parallel-fixtures";

/**
 * A lane's way from one task to the next is the step that begins the next task (its branch, its worktree handed on, its
 * first turn); the finished task's merge is not on it — nothing of the round waits for that merge before the round's
 * end, and the lane's next task is cut from the lane's own start commit. Both used to be asked for at the same moment,
 * so the merge's git work ran beside the begin and slowed it. Now a lane hands its finished task to the round's merges
 * once it has begun its next task (or stops), so the merge runs beside the next task's turns; a lane's last task is
 * handed over at once. Here the begin of a lane's second task is held for a while: the first task's merge starts only
 * after it.
 */

const seen = vi.hoisted(() => ({
  /** When each task's beginTask returned (ms since the epoch). */
  begun: new Map<string, number>(),
  /** Each merge step's start: the tasks it was asked to merge. */
  merges: [] as Array<{ at: number; taskIds: string[] }>,
  /** The task whose begin is held, and for how long. */
  hold: { taskId: "T3", ms: 2_000 },
}));
vi.mock("@/lib/runs/steps/tasks", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/tasks")>();
  return {
    ...original,
    beginTask: async (input: Parameters<typeof original.beginTask>[0]) => {
      if (input.taskId === seen.hold.taskId) await new Promise((resolve) => setTimeout(resolve, seen.hold.ms));
      const out = await original.beginTask(input);
      seen.begun.set(input.taskId, Date.now());
      return out;
    },
    mergeTasks: (input: Parameters<typeof original.mergeTasks>[0]) => {
      seen.merges.push({ at: Date.now(), taskIds: input.tasks.map((t) => t.taskId) });
      return original.mergeTasks(input);
    },
  };
});

const h = useWorkflowHarness();

type Ev = { type: string; payload: Record<string, unknown>; sequence: number };

// Limit 2: lanes [T1, T3] and [T2]. T2 runs a command long enough for T1 to end first.
const TASKS = [
  "# Three",
  "- [ ] T1: Write one",
  "  Files: one.txt",
  "- [ ] T2: Write two",
  "  Files: two.txt",
  "  [run: sleep 1]",
  "- [ ] T3: Write three",
  "  Files: three.txt",
  "",
].join("\n");

describe("a lane's finished task", () => {
  it("goes to the round's merges once its lane has begun its next task: its merge starts after that begin", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Merge after begin", tasks: TASKS });
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    const events = (await listEvents({ runId: run.id, limit: 1000 })) as Ev[];
    // T3 followed T1 in T1's lane (its begin made by the lane's deciding step).
    const created = events.find((e) => e.type === "TASK_BRANCH_CREATED" && e.payload.taskId === "T3")!;
    expect((created.payload as { stepKey?: string }).stepKey).toBe("impl:1:task:T3:1:begin");
    expect(events.some((e) => e.type === "TASK_BRANCH_CREATED" && e.payload.taskId === "T3" && (e.payload as { workspace?: string }).workspace?.endsWith("_lane-1-1"))).toBe(true);
    // The merge that took T1 started only after T3's begin (held for a while) returned.
    const t1 = seen.merges.find((m) => m.taskIds.includes("T1"))!;
    expect(t1).toBeTruthy();
    expect(t1.at).toBeGreaterThanOrEqual(seen.begun.get("T3")!);
    // Merged in plan order, every task's work on the run branch.
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => e.payload.taskId)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:three.txt`)).toBe("T3: Write three");
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });
});
