import { describe, expect, it } from "vitest";
import { dealLanes, effectiveDependencies, filesOverlap, planRounds, readyTasks, runsInParallel } from "./task-rounds";

describe("task rounds", () => {
  it("tasks whose Files: overlap run one after the other in plan order; the others still run side by side", () => {
    const tasks = [
      { id: "T1", files: ["src/badge.txt"] },
      { id: "T2", files: ["docs/readme.md"] },
      { id: "T3", files: ["./src/badge.txt", "src/other.ts"] },
      { id: "T4", files: ["src/"] },
    ];
    expect(effectiveDependencies(tasks)).toEqual(
      new Map([
        ["T1", []],
        ["T2", []],
        ["T3", ["T1"]],
        ["T4", ["T1", "T3"]],
      ]),
    );
    expect(planRounds({ tasks }, new Set(), 3)).toEqual([[["T1"], ["T2"]], [["T3"]], [["T4"]]]);
    // Plan order decides, not which task finished first: T3 waits for T1 even when T2 is done.
    expect(readyTasks(tasks, new Set(["T2"]), new Set()).map((t) => t.id)).toEqual(["T1"]);
    // A skipped task (triage) no longer holds back the tasks that share its file.
    expect(readyTasks(tasks, new Set(), new Set(["T1"])).map((t) => t.id)).toEqual(["T2", "T3"]);
  });

  it("a glob or a directory in Files: overlaps the files under it; distinct files do not", () => {
    expect(filesOverlap(["src/**/*.ts"], ["src/a/b.ts"])).toBe(true);
    expect(filesOverlap(["**/*.md"], ["README.md"])).toBe(true);
    expect(filesOverlap(["lib"], ["lib/x.ts"])).toBe(true);
    expect(filesOverlap(["lib/x.ts"], ["lib/xy.ts"])).toBe(false);
    expect(filesOverlap(["a.txt"], [])).toBe(false);
    expect(filesOverlap(undefined, ["a.txt"])).toBe(false);
  });

  it("explicit dependencies are kept alongside the shared-file ones", () => {
    const tasks = [
      { id: "A", files: ["x"] },
      { id: "B", files: ["y"], dependsOn: ["A"] },
      { id: "C", files: ["y"] },
    ];
    expect(effectiveDependencies(tasks).get("B")).toEqual(["A"]);
    expect(effectiveDependencies(tasks).get("C")).toEqual(["B"]);
    expect(planRounds({ tasks }, new Set(), 3)).toEqual([[["A"]], [["B"]], [["C"]]]);
  });

  it("a round takes every ready task, dealt round-robin in plan order into at most `limit` lanes", () => {
    const six = Array.from({ length: 6 }, (_, i) => ({ id: `T${i + 1}`, files: [`out/t${i + 1}.txt`] }));
    // One round, no barrier between T1–T3 and T4–T6: each lane runs its second task as soon as its first ends.
    expect(planRounds({ tasks: six }, new Set(), 3)).toEqual([[["T1", "T4"], ["T2", "T5"], ["T3", "T6"]]]);
    expect(planRounds({ tasks: six }, new Set(), 4)).toEqual([[["T1", "T5"], ["T2", "T6"], ["T3"], ["T4"]]]);
    expect(planRounds({ tasks: six }, new Set(), 10)).toEqual([six.map((t) => [t.id])]);
    expect(planRounds({ tasks: six }, new Set(["T2", "T3"]), 3)).toEqual([[["T1", "T6"], ["T4"], ["T5"]]]);
    // A dependent task waits for the round that merges what it needs.
    const withNote = [...six, { id: "T7", files: ["note.md"], dependsOn: ["T1", "T6"] }];
    expect(planRounds({ tasks: withNote }, new Set(), 3)).toEqual([[["T1", "T4"], ["T2", "T5"], ["T3", "T6"]], [["T7"]]]);
    expect(dealLanes([], 3)).toEqual([]);
    expect(dealLanes(["a", "b"], 1)).toEqual([["a", "b"]]);
    expect(runsInParallel({ tasks: six }, [], 1)).toBe(false);
    expect(runsInParallel({ tasks: six }, [], 2)).toBe(true);
    expect(runsInParallel({ tasks: withNote }, six.slice(1).map((t) => ({ id: t.id })), 3)).toBe(false);
  });
});
