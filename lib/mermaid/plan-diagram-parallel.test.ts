import { describe, expect, it } from "vitest";
import { colourByStatus, parseFlowGraph, validateMermaid } from "@/lib/mermaid";
import { taskStatuses } from "@/lib/workflow/task-status";
import type { PlanDocument } from "@/lib/workflow/events";

/*
 * Issue #31, item 6: "The live plan diagram shows several tasks running at once." The run page colours its diagram
 * from the run's events as they arrive (components/run/run-view.tsx: taskStatuses; components/run/plan-diagrams.tsx: colourByStatus);
 * here, the events of a parallel run as they stand partway through its first round.
 */

const tasks: PlanDocument["tasks"] = [
  { id: "T1", title: "Write alpha", files: ["alpha.txt"] },
  { id: "T2", title: "Write beta", files: ["beta.txt"] },
  { id: "T3", title: "Write gamma", files: ["gamma.txt"] },
  { id: "T4", title: "Write the summary", files: ["summary.txt"], dependsOn: ["T1", "T2", "T3"] },
];

const DIAGRAM = `flowchart TD
  T1["Write alpha"]
  T2["Write beta"]
  T3["Write gamma"]
  T4["Write the summary"]
  T1 --> T4
  T2 --> T4
  T3 --> T4`;

/** The `class` lines of a coloured diagram, as status class → node ids. */
function classLines(source: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const m of source.matchAll(/^\s*class (\S+) (\w+)$/gm)) out[m[2]!] = m[1]!.split(",").sort();
  return out;
}

const ev = (type: string, payload: Record<string, unknown>) => ({ type, payload });

describe("the live plan diagram of a run whose tasks run in parallel", () => {
  it("colours every task under way as running at once, a finished one done, one not begun pending; the diagram still parses", async () => {
    const graph = await parseFlowGraph(DIAGRAM);
    // Round 1 (limit 3): T1–T3 cut and started side by side; T2 has completed while T1 and T3 still work.
    const events = [
      ev("TASK_BRANCH_CREATED", { taskId: "T1", branch: "b--T1", run: 1, round: 1 }),
      ev("TASK_BRANCH_CREATED", { taskId: "T2", branch: "b--T2", run: 1, round: 1 }),
      ev("TASK_BRANCH_CREATED", { taskId: "T3", branch: "b--T3", run: 1, round: 1 }),
      ev("TASK_STARTED", { taskId: "T2" }),
      ev("TASK_STARTED", { taskId: "T1" }),
      ev("TASK_STARTED", { taskId: "T3" }),
      ev("TASK_COMPLETED", { taskId: "T2" }),
    ];
    const { source, coloured } = colourByStatus({ source: DIAGRAM, graph, tasks, statuses: taskStatuses(events) });
    expect(coloured).toEqual({ T1: "running", T2: "done", T3: "running", T4: "pending" });
    expect(classLines(source)).toEqual({ ghRunning: ["T1", "T3"], ghDone: ["T2"], ghPending: ["T4"] });
    await expect(validateMermaid(source)).resolves.toEqual({ kind: "flowchart" });

    // The round merged, T4 under way alone: the first three done.
    const later = [...events, ev("TASK_COMPLETED", { taskId: "T1" }), ev("TASK_COMPLETED", { taskId: "T3" }), ev("TASK_STARTED", { taskId: "T4" })];
    expect(classLines(colourByStatus({ source: DIAGRAM, graph, tasks, statuses: taskStatuses(later) }).source)).toEqual({ ghRunning: ["T4"], ghDone: ["T1", "T2", "T3"] });
  });
});
