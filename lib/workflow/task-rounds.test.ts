import { describe, expect, it } from "vitest";
import { effectiveDependencies, filesOverlap, planRounds, readyTasks } from "./task-rounds";

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
    expect(planRounds({ tasks }, new Set(), 3)).toEqual([["T1", "T2"], ["T3"], ["T4"]]);
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
    expect(planRounds({ tasks }, new Set(), 3)).toEqual([["A"], ["B"], ["C"]]);
  });
});
