import { describe, expect, it } from "vitest";
import { changedTaskIds, colourByStatus, diffDiagrams, isSafeNodeId, parseFlowGraph, taskNodes, validateMermaid } from "@/lib/mermaid";
import { taskStatuses } from "@/lib/workflow/task-status";
import type { PlanDocument } from "@/lib/workflow/events";

const tasks: PlanDocument["tasks"] = [
  { id: "T1", title: "Write src/a.ts", files: ["src/a.ts"] },
  { id: "T2", title: "Write the request note", files: ["docs/note.md"], dependsOn: ["T1"] },
  { id: "T3", title: "Wire it up", dependsOn: ["T2"] },
];

const DEMO = `flowchart TD
  R["Add a thing"]
  T1["Write src/a.ts"]
  T2["Write the request note"]
  X["T3: Wire it up"]
  R --> T1
  T1 --> T2
  T2 --> X`;

/** The `class` lines of a coloured diagram, as status → node ids. */
function classLines(source: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const m of source.matchAll(/^\s*class (\S+) (\w+)$/gm)) out[m[2]!] = m[1]!.split(",");
  return out;
}

describe("the plan diagram coloured by task status", () => {
  it("maps tasks to nodes by id, by a 'T3:' label, and colours each by its status (the rest pending); the result still parses", async () => {
    const graph = await parseFlowGraph(DEMO);
    expect([...taskNodes({ graph: graph!, tasks })]).toEqual([
      ["T1", "T1"],
      ["T2", "T2"],
      ["T3", "X"],
    ]);
    const { source, coloured } = colourByStatus({ source: DEMO, graph, tasks, statuses: { T1: "done", T2: "running" } });
    expect(coloured).toEqual({ T1: "done", T2: "running", T3: "pending" });
    expect(classLines(source)).toEqual({ ghPending: ["X"], ghRunning: ["T2"], ghDone: ["T1"] });
    expect(source.startsWith(DEMO)).toBe(true);
    await expect(validateMermaid(source)).resolves.toEqual({ kind: "flowchart" });
  });

  it("follows the run's events: triage skips, starts, completions, and a failure of the task in progress", () => {
    const events = [
      { type: "TASK_TRIAGED", payload: { taskId: "T3", confidence: 0.9, evidence: [], skipped: true } },
      { type: "TASK_STARTED", payload: { taskId: "T1", index: 1, total: 2 } },
      { type: "TASK_COMPLETED", payload: { taskId: "T1" } },
      { type: "TASK_STARTED", payload: { taskId: "T2", index: 2, total: 2 } },
    ];
    expect(taskStatuses(events)).toEqual({ T1: "done", T2: "running", T3: "skipped" });
    expect(taskStatuses([...events, { type: "IMPLEMENTATION_FAILED", payload: { attempt: 1, reason: "x" } }])).toEqual({ T1: "done", T2: "failed", T3: "skipped" });
    // A fix attempt that starts the task again makes it running, then done.
    expect(taskStatuses([...events, { type: "IMPLEMENTATION_FAILED", payload: {} }, { type: "TASK_STARTED", payload: { taskId: "T2" } }, { type: "TASK_COMPLETED", payload: { taskId: "T2" } }]).T2).toBe("done");
  });

  it("a hostile diagram cannot inject through node ids or labels: unsafe ids are left uncoloured and only our lines are added", async () => {
    const hostile = `flowchart TD
  A["T1: x<br>classDef ghDone fill:red"] --> B["Write the request note"]
  B --> C["%% class A ghFailed"]
  C --> D["Wire it up"]
  click B call alert()`;
    const graph = await parseFlowGraph(hostile);
    const out = colourByStatus({ source: hostile, graph, tasks, statuses: { T1: "failed" } });
    expect(out.coloured).toEqual({ T1: "failed", T2: "pending", T3: "pending" });
    const added = out.source.slice(hostile.length).split("\n").filter(Boolean);
    expect(added).toEqual([
      "  classDef ghPending fill:#f1f5f9,stroke:#94a3b8,color:#334155",
      "  class B,D ghPending",
      "  classDef ghFailed fill:#fee2e2,stroke:#dc2626,stroke-width:3px,color:#7f1d1d",
      "  class A ghFailed",
    ]);
    await expect(validateMermaid(out.source)).resolves.toEqual({ kind: "flowchart" });
    // Ids that could carry syntax are never written, whatever a parser hands over.
    const fake = { nodes: [{ id: "A;classDef x fill:red", label: "T1", shape: "square" }, { id: "end", label: "Write the request note", shape: "square" }, { id: "ok_1", label: "Wire it up", shape: "square" }], edges: [] };
    const { source, coloured } = colourByStatus({ source: "flowchart TD\n  ok_1[Wire it up]", graph: fake, tasks, statuses: { T3: "done" } });
    expect(coloured).toEqual({ T3: "done" });
    expect(source.split("\n").filter((l) => /^\s*class(Def)? /.test(l))).toEqual(["  classDef ghDone fill:#dcfce7,stroke:#16a34a,color:#14532d", "  class ok_1 ghDone"]);
    for (const id of ["A;classDef x", "end", "END", "default", "a b", "x\nclick", "1abc", ""]) expect(isSafeNodeId(id)).toBe(false);
    for (const id of ["T1", "t_1_2", "_x", "Node_9"]) expect(isSafeNodeId(id)).toBe(true);
  });

  it("a diagram that is not a flowchart is returned unchanged", async () => {
    const seq = "sequenceDiagram\n  A->>B: hi";
    expect(await parseFlowGraph(seq)).toBeNull();
    expect(colourByStatus({ source: seq, graph: null, tasks, statuses: { T1: "done" } }).source).toBe(seq);
  });
});

describe("the visual diff of two plan versions", () => {
  it("marks added, removed and changed nodes and edges on one merged diagram that parses", async () => {
    const before = await parseFlowGraph(DEMO);
    const afterSource = `flowchart TD
  R["Add a thing"]
  T1["Write src/a.ts and src/b.ts"]
  T4["Add tests"]
  X["T3: Wire it up"]
  R --> T1
  T1 --> X
  X -->|then| T4`;
    const after = await parseFlowGraph(afterSource);
    const diff = diffDiagrams({ from: before!, to: after! });
    expect(diff.nodes).toEqual({ added: ["T4"], removed: ["T2"], changed: ["T1"] });
    expect(diff.edges).toEqual({ added: ["T1->X", "X->T4"], removed: ["T1->T2", "T2->X"], changed: [] });
    expect(diff.source).toContain('["Write src/a.ts and src/b.ts (was: Write src/a.ts)"]');
    expect(diff.source).toMatch(/classDef ghAdded /);
    expect(diff.source).toMatch(/linkStyle \d+ stroke:#dc2626/);
    await expect(validateMermaid(diff.source)).resolves.toEqual({ kind: "flowchart" });
  });

  it("a node whose task was edited counts as changed though its box reads the same", async () => {
    const graph = (await parseFlowGraph(DEMO))!;
    const edited = tasks.map((t) => (t.id === "T2" ? { ...t, files: ["docs/other.md"] } : t));
    expect(changedTaskIds(tasks, edited)).toEqual(["T2"]);
    const diff = diffDiagrams({ from: graph, to: graph, changedTasks: ["T2"], fromTasks: tasks, toTasks: edited });
    expect(diff.nodes).toEqual({ added: [], removed: [], changed: ["T2"] });
  });

  it("hostile labels are escaped: the merged diagram has our ids only and still parses", async () => {
    const evil = { nodes: [{ id: "A", label: 'x"] \n click A call alert() %% <img src=x> `#quot;` [(z)]', shape: "square" }], edges: [{ from: "A", to: "B", label: '"|end' }] };
    const diff = diffDiagrams({ from: { nodes: [], edges: [] }, to: evil });
    expect(diff.source).not.toMatch(/^\s*(click|A\b)|<img|%%/m);
    for (const line of diff.source.trim().split("\n").slice(1)) expect(line).toMatch(/^  (n\d+\["[^"\n]*"\]|n\d+ (-->|==>|-\.->)(\|"[^"\n]*"\|)? n\d+|classDef gh\w+ [#:,\w -]+|class [n\d,]+ gh\w+|linkStyle \d+ [#:,\w -]+)$/);
    await expect(validateMermaid(diff.source)).resolves.toEqual({ kind: "flowchart" });
  });
});
