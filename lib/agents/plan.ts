import { z } from "zod";
import type { MermaidConstraints } from "@/lib/mermaid";

/**
 * The planner's structured output. Every field is required (nullable where optional) so the same schema works with
 * providers that enforce strict JSON schemas.
 */
export const taskSchema = z.object({
  id: z.string().min(1).describe("Short id, e.g. T1"),
  title: z.string().min(1),
  description: z.string(),
  dependsOn: z.array(z.string()).describe("Ids of tasks that must be finished first"),
  files: z.array(z.string()).describe("Files or folders (relative paths) this task may change; the plan's scope"),
  // Optional for the planner (a draft without it is still a plan), but a structured-output provider is offered it.
  // Lenient here (blank ones are dropped, the list is cut to 20 in the planner): one odd command must not void a plan.
  checks: z
    .array(z.string())
    .default([])
    .describe("The task's own acceptance commands (exit 0 = done), run right after the task to verify it, e.g. `npm test -- greet`"),
});

export const criterionSchema = z.object({
  id: z.string().nullable(),
  description: z.string().min(1),
  command: z.string().nullable().describe("A command that proves the criterion when it exits 0, e.g. `npm test`"),
});

export const plannerOutputSchema = z.object({
  kind: z.enum(["plan", "clarification"]).describe('"clarification" only when the request cannot be planned without an answer'),
  clarification: z
    .object({
      question: z.string().min(1),
      context: z.string().nullable(),
      options: z.array(z.string()).describe("Choices for a single-choice answer; empty for free text"),
      responseType: z.enum(["text", "single_choice"]),
    })
    .nullable(),
  summary: z.string(),
  mermaid: z.string().describe("A Mermaid diagram (flowchart, sequence, class, ER or state) of the planned change, without a code fence"),
  tasks: z.array(taskSchema),
  acceptanceCriteria: z.array(criterionSchema),
  risks: z.array(z.string()),
});

/**
 * The planner's output when a person asked it a question on the plan gate ("ask back"): the answer, plus the whole
 * plan again, revised where the question shows it should be.
 */
export const plannerAnswerSchema = plannerOutputSchema.extend({
  answer: z.string().min(1).describe("Your answer to the person's question in <plan-question>, for them to read on the plan card"),
});

export type PlannerOutput = z.infer<typeof plannerOutputSchema>;
/** `checks` may be absent in a task built by hand (a stored plan document, a test): it means none. */
export type PlanTask = Omit<z.infer<typeof taskSchema>, "checks"> & { checks?: string[] };
export type AcceptanceCriterion = { id: string; description: string; command?: string };

/** A checked plan: what the plan gate shows and the implementer and validator work from. */
export type Plan = {
  summary: string;
  mermaid: string;
  tasks: PlanTask[];
  acceptanceCriteria: AcceptanceCriterion[];
  risks: string[];
  constraints: MermaidConstraints;
};

/** Every file or folder the plan allows to change. */
export function planScope(plan: Pick<Plan, "tasks">): string[] {
  return [...new Set(plan.tasks.flatMap((t) => t.files))];
}

/** The plan as the implementer and validator read it (no constraints noise when there are none). */
export function describePlan(plan: Plan): string {
  const lines = [`Summary: ${plan.summary}`, "", "Tasks:"];
  for (const t of plan.tasks) {
    lines.push(`- ${t.id}: ${t.title}${t.dependsOn.length ? ` (after ${t.dependsOn.join(", ")})` : ""}`);
    if (t.description) lines.push(`  ${t.description}`);
    if (t.files.length) lines.push(`  Files: ${t.files.join(", ")}`);
    if (t.checks?.length) lines.push(`  Verified by: ${t.checks.map((c) => `\`${c}\``).join(", ")}`);
  }
  lines.push("", "Acceptance criteria:");
  for (const c of plan.acceptanceCriteria) lines.push(`- ${c.id}: ${c.description}${c.command ? ` (\`${c.command}\`)` : ""}`);
  if (plan.constraints.validationRules.length) {
    lines.push("", "Diagram rules:", ...plan.constraints.validationRules.map((r) => `- ${r}`));
  }
  lines.push("", "Diagram:", plan.mermaid);
  return lines.join("\n");
}
