import { describe, expect, it } from "vitest";
import { checkTask, parseTasksMd, pastedTasksMd, planFromTasksMd } from "./tasks-md";

describe("tasks.md", () => {
  it("parses ids, (after …) dependencies, nesting (the parent depends on its children), files, checks and descriptions", () => {
    const tasks = parseTasksMd(
      [
        "# Plan",
        "- [ ] API: Build the API (after setup)",
        "  Files: src/api.ts, `src/api.test.ts`",
        "  Check: npm test -- api",
        "  Keep it small.",
        "  - [x] Write the route",
        "  - [ ] Write its tests",
        "* [X] setup: Set up",
        "Some prose at the margin.",
        "  not a description of anything",
      ].join("\n"),
    );
    expect(tasks.map((t) => [t.id, t.title, t.dependsOn, t.checked])).toEqual([
      ["API", "Build the API", ["setup", "T2", "T3"], false],
      ["T2", "Write the route", [], true],
      ["T3", "Write its tests", [], false],
      ["setup", "Set up", [], true],
    ]);
    expect(tasks[0]).toMatchObject({ files: ["src/api.ts", "src/api.test.ts"], checks: ["npm test -- api"], description: "Keep it small." });
  });

  it("refuses what cannot be worked: no tasks, a duplicate id, an unknown dependency, a cycle", () => {
    expect(() => parseTasksMd("# nothing to do")).toThrow(/no tasks found/);
    expect(() => parseTasksMd("- [ ] A: a\n- [ ] A: b")).toThrow(/line 2: the id A is used twice/);
    expect(() => parseTasksMd("- [ ] A: a (after B)")).toThrow(/A depends on B, which is not a task here/);
    expect(() => parseTasksMd("- [ ] A: a (after B)\n- [ ] B: b (after A)")).toThrow(/cycle: A → B → A/);
  });

  it("checks one box and leaves the rest of the file as it was", () => {
    const text = "intro\n- [ ] T1: a\n  - [ ] T2: b\n";
    expect(checkTask(text, "T2")).toBe("intro\n- [ ] T1: a\n  - [x] T2: b\n");
    expect(checkTask(checkTask(text, "T2"), "T2")).toBe(checkTask(text, "T2"));
  });

  it("finds a pasted tasks.md and plans only its open tasks; a dependency on a checked task is met", () => {
    const text = pastedTasksMd("Do it\n```tasks.md\n- [x] T1: a\n- [ ] T2: b (after T1)\n  Check: true\n```\n");
    expect(text).toBe("- [x] T1: a\n- [ ] T2: b (after T1)\n  Check: true\n");
    const plan = planFromTasksMd({ text: text!, path: "tasks.md", title: "Do it" });
    expect(plan.tasks).toEqual([{ id: "T2", title: "b", description: "", dependsOn: [], files: ["tasks.md"], checks: ["true"] }]);
    expect(plan.skipped).toEqual([{ id: "T1", title: "a", reason: "checked in tasks.md" }]);
    expect(pastedTasksMd("no block")).toBeNull();
  });
});
