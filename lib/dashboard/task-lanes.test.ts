import { describe, expect, it } from "vitest";
import { taskLanes } from "./task-lanes";

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
let seq = 0;
const ev = (type: string, s: number, payload: Record<string, unknown>) => ({ sequence: ++seq, type, timestamp: at(s), payload });

describe("task lanes", () => {
  it("one lane per parallel task, a bar from its branch to its merge; bars that overlap show tasks that ran at once", () => {
    const lanes = taskLanes(
      [
        ev("TASK_BRANCH_CREATED", 0, { taskId: "T1", run: 1 }),
        ev("TASK_BRANCH_CREATED", 0, { taskId: "T2", run: 1 }),
        ev("TASK_MERGED", 4, { taskId: "T1" }),
        ev("TASK_MERGE_CONFLICT", 4, { taskId: "T2" }),
        ev("TASK_BRANCH_CREATED", 5, { taskId: "T2", run: 2 }),
        ev("TASK_BRANCH_CREATED", 5, { taskId: "T3", run: 1 }),
        ev("TASK_MERGED", 10, { taskId: "T2" }),
      ],
      Date.parse(at(10)),
    )!;
    expect(lanes.overlap).toBe(true);
    expect(lanes.lanes.map((l) => [l.taskId, l.bars.map((b) => [b.run, b.state, b.left, b.width])])).toEqual([
      ["T1", [[1, "merged", 0, 0.4]]],
      [
        "T2",
        [
          [1, "conflict", 0, 0.4],
          [2, "merged", 0.5, 0.5],
        ],
      ],
      ["T3", [[1, "working", 0.5, 0.5]]],
    ]);
  });

  it("tasks one after the other do not overlap; a task open when the run was cancelled stopped there; no tasks, no lanes", () => {
    const lanes = taskLanes(
      [
        ev("TASK_BRANCH_CREATED", 0, { taskId: "T1", run: 1 }),
        ev("TASK_MERGED", 2, { taskId: "T1" }),
        ev("TASK_BRANCH_CREATED", 3, { taskId: "T2", run: 1 }),
        ev("RUN_CANCELLED", 4, {}),
      ],
      Date.parse(at(100)),
    )!;
    expect(lanes.overlap).toBe(false);
    expect(lanes.lanes[1]!.bars[0]).toMatchObject({ state: "stopped", end: Date.parse(at(4)), left: 0.75, width: 0.25 });
    expect(taskLanes([ev("TASK_STARTED", 0, { taskId: "T1" })], 0)).toBeNull();
  });
});
