import { z } from "zod";
import { AppError } from "@/lib/errors";
import { MermaidTooComplexError, sanitizeDiagram, validateMermaid } from "@/lib/mermaid";

/*
 * A plan as a person edits it at a plan gate (or fixes it to resume a run paused with an invalid plan): checked here,
 * applied by lib/runs/plan-edits.ts.
 */

export const planTaskSchema = z.strictObject({
  id: z.string().trim().min(1).max(100),
  title: z.string().trim().min(1).max(500),
  description: z.string().max(20_000).optional(),
  dependsOn: z.array(z.string().max(100)).max(100).optional(),
  files: z.array(z.string().max(1000)).max(500).optional(),
  /** The task's own acceptance commands, run right after it (per-task verification). */
  checks: z.array(z.string().trim().min(1, "must not be empty").max(2_000)).max(20).optional(),
});

export const acceptanceCriterionSchema = z.strictObject({
  id: z.string().trim().min(1).max(100).optional(),
  description: z.string().trim().min(1, "must say what is checked").max(5_000),
  /** Runs in the repository during validation; exit 0 = the criterion holds. */
  command: z.string().trim().min(1, "must not be empty (leave it out for a criterion without a command)").max(2_000).optional(),
});

/** A scope entry: a relative path inside the repository (a file or a folder), never absolute or climbing out. */
const scopePath = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(1000)
  .refine((p) => !p.startsWith("/") && !/^[A-Za-z]:/.test(p) && !p.split(/[\\/]/).includes(".."), "must be a path inside the repository (relative, no ..)");

export const editedPlanSchema = z
  .strictObject({
    // Stored as sanitized: no external images or links in labels (see lib/mermaid/sanitize.ts).
    mermaid: z.string().trim().min(1, "must not be empty").max(100_000).transform(sanitizeDiagram),
    // Each task's `files` is its scope: validation fails changes outside the union of them.
    tasks: z.array(planTaskSchema.extend({ files: z.array(scopePath).max(500).optional() })).max(200).optional(),
    acceptanceCriteria: z.array(acceptanceCriterionSchema).min(1, "keep at least one criterion").max(100).optional(),
    summary: z.string().max(5_000).optional(),
  })
  .superRefine((plan, ctx) => {
    const ids = new Set<string>();
    for (const [i, task] of (plan.tasks ?? []).entries()) {
      if (ids.has(task.id)) ctx.addIssue({ code: "custom", path: ["tasks", i, "id"], message: `"${task.id}" is used by another task; ids must be unique` });
      ids.add(task.id);
    }
    for (const [i, task] of (plan.tasks ?? []).entries()) {
      for (const dep of task.dependsOn ?? []) {
        if (dep === task.id) ctx.addIssue({ code: "custom", path: ["tasks", i, "dependsOn"], message: "a task cannot depend on itself" });
        else if (!ids.has(dep)) ctx.addIssue({ code: "custom", path: ["tasks", i, "dependsOn"], message: `"${dep}" is not a task of this plan` });
      }
    }
    const criteria = new Set<string>();
    for (const [i, c] of (plan.acceptanceCriteria ?? []).entries()) {
      if (c.id && criteria.has(c.id)) ctx.addIssue({ code: "custom", path: ["acceptanceCriteria", i, "id"], message: `"${c.id}" is used by another criterion` });
      if (c.id) criteria.add(c.id);
    }
    if (plan.tasks && hasCycle(plan.tasks)) ctx.addIssue({ code: "custom", path: ["tasks"], message: "the dependencies form a cycle; tasks must have an order" });
  });

/** Whether tasks' dependsOn form a cycle (then no order does them all). */
function hasCycle(tasks: Array<{ id: string; dependsOn?: string[] }>): boolean {
  const deps = new Map(tasks.map((t) => [t.id, t.dependsOn ?? []]));
  const state = new Map<string, "visiting" | "done">();
  const visit = (id: string): boolean => {
    if (state.get(id) === "done") return false;
    if (state.get(id) === "visiting") return true;
    state.set(id, "visiting");
    if ((deps.get(id) ?? []).some((d) => deps.has(d) && visit(d))) return true;
    state.set(id, "done");
    return false;
  };
  return tasks.some((t) => visit(t.id));
}

/** Validate an edited plan with mermaid's own grammar; a 400 names the line, a 422 a diagram too complex to parse. */
export async function checkEditedPlan(plan: z.output<typeof editedPlanSchema>): Promise<void> {
  try {
    await validateMermaid(plan.mermaid);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new AppError(error instanceof MermaidTooComplexError ? "unprocessable:mermaid" : "bad_request:mermaid", `editedPlan.mermaid: ${message}`);
  }
}
