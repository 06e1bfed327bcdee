import { describe, expect, it } from "vitest";
import { taskBranches, taskStatuses } from "./task-status";

const ev = (type: string, payload: Record<string, unknown>) => ({ type, payload });

describe("parallel tasks on the run page", () => {
  it("several tasks are running at once, each on its own branch, until merged; a re-run after a conflict replaces the branch's state", () => {
    const events = [
      ev("TASK_BRANCH_CREATED", { taskId: "T1", branch: "b--T1", run: 1 }),
      ev("TASK_BRANCH_CREATED", { taskId: "T2", branch: "b--T2", run: 1 }),
      ev("TASK_STARTED", { taskId: "T1" }),
      ev("TASK_STARTED", { taskId: "T2" }),
    ];
    expect(taskStatuses(events)).toEqual({ T1: "running", T2: "running" });
    const later = [
      ...events,
      ev("TASK_COMPLETED", { taskId: "T1" }),
      ev("TASK_COMPLETED", { taskId: "T2" }),
      ev("TASK_MERGED", { taskId: "T1", branch: "b--T1", commitSha: "a" }),
      ev("TASK_MERGE_CONFLICT", { taskId: "T2", branch: "b--T2", files: ["x"], next: "rerun" }),
    ];
    expect(taskBranches(later)).toEqual({ T1: { branch: "b--T1", run: 1, state: "merged" }, T2: { branch: "b--T2", run: 1, state: "conflict" } });
    expect(taskBranches([...later, ev("TASK_BRANCH_CREATED", { taskId: "T2", branch: "b--T2", run: 2 })]).T2).toEqual({ branch: "b--T2", run: 2, state: "working" });
  });
});
