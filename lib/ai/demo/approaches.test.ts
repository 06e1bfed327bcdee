import { describe, expect, it } from "vitest";
import { runPlanner } from "@/lib/agents/planner";

async function planFor(request: string, key: string) {
  const planned = await runPlanner({ input: { request }, modelId: "demo:default", context: { stepKey: `demo-approaches:${key}` } });
  if (planned.kind !== "plan") throw new Error("expected a plan");
  return planned.plan;
}

describe("demo model: approaches started together", () => {
  it("plans a different route for approach 2 than for approach 1, and says which approach it is", async () => {
    const base = "Write the greeting\n\n```file:hello.txt\nhello\n```";
    const first = await planFor(`${base}\n\nApproach 1 of 2`, "a1");
    const second = await planFor(`${base}\n\nApproach 2 of 2`, "a2");
    expect(first.summary).toContain("approach 1");
    expect(second.summary).toContain("approach 2");
    expect(first.tasks.map((t) => t.title)).toEqual(["Write hello.txt", "Write the request note"]);
    expect(second.tasks.map((t) => t.title)).toEqual(["Write the request note", "Write hello.txt"]);
    expect(second.mermaid).not.toBe(first.mermaid);
  });

  it("keeps the whole first line in the plan summary instead of cutting it mid-phrase", async () => {
    const line = "Add a settings page where a signed-in person can switch between light and dark themes and keep the choice";
    const plan = await planFor(line, "long");
    expect(plan.summary).toBe(`Demo plan (scripted): ${line}`);
  });
});
