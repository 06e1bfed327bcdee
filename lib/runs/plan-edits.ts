import type { PlanDocument } from "@/lib/workflow";

/** A plan as a person edited it (lib/runs/gates/edited-plan.ts): a field left out keeps the drafted plan's. */
export type EditedPlan = { mermaid: string; summary?: string; tasks?: PlanDocument["tasks"]; acceptanceCriteria?: PlanDocument["acceptanceCriteria"] };

/**
 * The drafted plan with a person's edits applied: the diagram always; tasks (with their files, the scope), acceptance
 * criteria (with their commands) and summary where given. An empty task list or summary keeps the draft's; risks stay.
 */
export function applyPlanEdits({ drafted, edited }: { drafted: PlanDocument; edited: EditedPlan }): PlanDocument {
  return {
    ...drafted,
    mermaid: edited.mermaid,
    summary: edited.summary?.trim() ? edited.summary : drafted.summary,
    tasks: edited.tasks?.length ? edited.tasks : drafted.tasks,
    acceptanceCriteria: edited.acceptanceCriteria ?? drafted.acceptanceCriteria,
  };
}
