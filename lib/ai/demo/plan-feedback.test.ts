import { describe, expect, it } from "vitest";
import { runPlanner, type PlannerInput } from "@/lib/agents/planner";

// #32 finding 6: the demo planner ignored planning answers and rejection feedback, so a rejected plan came back the same.

let n = 0;
async function plan(input: PlannerInput) {
  const result = await runPlanner({ input, modelId: "demo:default", context: { stepKey: `demo-plan-feedback-${++n}` } });
  if (result.kind !== "plan") throw new Error(`expected a plan, got ${result.kind}`);
  return result.plan;
}

describe("the demo planner shows what a person told it", () => {
  it("a plan made after a rejection differs from the rejected one and carries the newest feedback", async () => {
    const request = "Add a greeting module";
    const v1 = await plan({ request });
    const v2 = await plan({ request, rejectionFeedback: ["use British spelling", "add a README section"] });
    expect(v2.mermaid).not.toBe(v1.mermaid);
    expect(v2.mermaid).toContain(`F["Feedback: add a README section"] --> T1`);
    expect(v2.mermaid).not.toContain("British");
    expect(v2.tasks[0]!.description).toContain("Feedback: add a README section");
    expect(v2.summary).toContain("revised for your feedback");
    // Deterministic: the same input, the same plan.
    expect(await plan({ request, rejectionFeedback: ["use British spelling", "add a README section"] })).toEqual(v2);
  });

  it("a planning answer appears in the plan's diagram and in the task it concerns", async () => {
    const request = "Add a greeting [plan-ask: Which languages?]";
    const answered = await plan({ request, clarifications: [{ question: "Which languages?", answer: "English and German" }] });
    expect(answered.mermaid).toContain(`A1["Answer: English and German"] --> T1`);
    expect(answered.tasks[0]!.description).toContain("Planning answer: Which languages? — English and German");
  });

  it("a re-plan the implementer proposed is not shown as a person's feedback", async () => {
    const request = "Add a greeting";
    const replanned = await plan({ request, rejectionFeedback: ["Re-plan proposed by the implementer. Observation: x Proposal: y"] });
    expect(replanned.mermaid).not.toContain("Feedback:");
    expect(replanned).toEqual(await plan({ request }));
  });
});
