import { describe, expect, it } from "vitest";
import { createScriptedModel } from "@/lib/ai/scripted-model";
import { runPlanner } from "./planner";

/** The planner's tasks carry their own acceptance commands (checks) for per-task verification; the output is untrusted. */

function plannerReplying(tasks: unknown[]) {
  return createScriptedModel({
    respond: () => ({
      text: JSON.stringify({
        kind: "plan",
        clarification: null,
        summary: "Add numbers",
        mermaid: "flowchart TD\n  A[Start] --> B[Add]",
        tasks,
        acceptanceCriteria: [{ id: null, description: "the test passes", command: "sh test-add.sh" }],
        risks: [],
      }),
    }),
  });
}

describe("the planner's per-task checks", () => {
  it("are carried into the plan, blank ones dropped and the list cut to 20", async () => {
    const checks = ["  sh test-add.sh  ", "", "   ", ...Array.from({ length: 30 }, (_, i) => `true ${i}`)];
    const model = plannerReplying([{ id: "T1", title: "Add", description: "", dependsOn: [], files: ["add.sh"], checks }]);
    const result = await runPlanner({ input: { request: "Add numbers" }, modelId: "demo:test", model, context: {} });
    expect(result.kind).toBe("plan");
    const task = result.kind === "plan" ? result.plan.tasks[0]! : null;
    expect(task!.checks![0]).toBe("sh test-add.sh");
    expect(task!.checks).toHaveLength(20);
    expect(task!.checks).not.toContain("");
  });

  it("a plan without them is still a plan (no checks)", async () => {
    const model = plannerReplying([{ id: "T1", title: "Add", description: "", dependsOn: [], files: ["add.sh"] }]);
    const result = await runPlanner({ input: { request: "Add numbers" }, modelId: "demo:test", model, context: {} });
    expect(result.kind === "plan" && result.plan.tasks[0]!.checks).toEqual([]);
  });
});
