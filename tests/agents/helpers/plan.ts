import type { Plan, PlanTask } from "@/lib/agents/plan";

export function planOf({
  tasks,
  criteria = [],
}: {
  tasks: Array<Partial<PlanTask> & { id: string; files: string[] }>;
  criteria?: Plan["acceptanceCriteria"];
}): Plan {
  return {
    summary: "Test plan",
    mermaid: "flowchart TD\n  A[Start] --> B[End]",
    tasks: tasks.map((t) => ({ title: `Task ${t.id}`, description: "", dependsOn: [], ...t })),
    acceptanceCriteria: criteria,
    risks: [],
    constraints: {
      diagramType: "flowchart",
      requiredRoutes: ["Start", "End"],
      requiredComponents: [],
      conditionalBranches: [],
      dataEntities: [],
      relationships: [],
      participants: [],
      states: [],
      validationRules: ['Route "Start" exists', 'Route "End" exists'],
    },
  };
}
