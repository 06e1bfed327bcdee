import { describe, expect, it } from "vitest";
import { approvedPlanHash, planHash } from "./plan-hash";
import type { PlanDocument } from "./events";

const plan: PlanDocument = {
  summary: "Write a note",
  mermaid: "flowchart TD\n  T1 --> T2",
  tasks: [
    { id: "T1", title: "Write a.txt", files: ["a.txt"] },
    { id: "T2", title: "Write the note", files: ["docs/"], dependsOn: ["T1"] },
  ],
  acceptanceCriteria: [{ id: "AC1", description: "a.txt exists", command: "test -f a.txt" }],
};

describe("planHash: what a person approved, frozen", () => {
  it("is the same for the same tasks, scope, criteria and diagram, whatever the key order or the summary", () => {
    const reordered = JSON.parse(JSON.stringify({ acceptanceCriteria: plan.acceptanceCriteria, tasks: plan.tasks.map((t) => ({ files: t.files, dependsOn: t.dependsOn, title: t.title, id: t.id })), mermaid: plan.mermaid, summary: "another summary" })) as PlanDocument;
    expect(planHash(reordered)).toBe(planHash(plan));
    expect(planHash(plan)).toMatch(/^[0-9a-f]{64}$/);
  });

  it("changes with a task, its scope, an acceptance criterion or the diagram", () => {
    const base = planHash(plan);
    const changed: PlanDocument[] = [
      { ...plan, tasks: [plan.tasks[0]!, { ...plan.tasks[1]!, title: "Write two notes" }] },
      { ...plan, tasks: [{ ...plan.tasks[0]!, files: ["a.txt", "b.txt"] }, plan.tasks[1]!] },
      { ...plan, acceptanceCriteria: [{ ...plan.acceptanceCriteria[0]!, command: "true" }] },
      { ...plan, mermaid: "flowchart TD\n  T2 --> T1" },
      { ...plan, tasks: [...plan.tasks].reverse() },
    ];
    const hashes = changed.map(planHash);
    expect(hashes.every((h) => h !== base)).toBe(true);
    expect(new Set(hashes).size).toBe(changed.length);
  });

  it("the plan in force: the last approval's hash, else (no plan gate) the last plan recorded", () => {
    const edited = { ...plan, tasks: [plan.tasks[0]!] };
    const approvedOnly = [
      { type: "PLAN_CREATED" as const, payload: { version: 1, plan } },
      { type: "APPROVAL_GRANTED" as const, payload: { gateId: "g1", by: "u", planHash: planHash(plan) } },
      // A re-plan drafted but not (yet) approved does not replace the approved plan.
      { type: "PLAN_CREATED" as const, payload: { version: 2, plan: edited } },
      { type: "APPROVAL_GRANTED" as const, payload: { gateId: "g2", by: "u" } },
    ];
    expect(approvedPlanHash(approvedOnly)).toBe(planHash(plan));
    expect(approvedPlanHash([{ type: "PLAN_CREATED" as const, payload: { version: 1, plan: edited } }])).toBe(planHash(edited));
    expect(approvedPlanHash([])).toBeNull();
  });
});
