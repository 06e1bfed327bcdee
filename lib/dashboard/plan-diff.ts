import { createTwoFilesPatch } from "diff";
import type { PlanDocument } from "@/lib/workflow/events";

/**
 * A plan as reviewable text: the summary, the Mermaid source, then tasks and acceptance criteria one per line, so a
 * line diff between two versions shows what changed where a reviewer looks for it.
 */
export function planToText(plan: PlanDocument): string {
  const lines: string[] = ["# Summary", plan.summary.trim(), "", "# Diagram", plan.mermaid.trim(), "", "# Tasks"];
  for (const task of plan.tasks) {
    const deps = task.dependsOn?.length ? ` (after ${task.dependsOn.join(", ")})` : "";
    lines.push(`- [${task.id}] ${task.title}${deps}`);
    if (task.description?.trim()) lines.push(...task.description.trim().split("\n").map((l) => `    ${l}`));
    if (task.files?.length) lines.push(`    files: ${task.files.join(", ")}`);
  }
  lines.push("", "# Acceptance criteria");
  for (const c of plan.acceptanceCriteria) lines.push(`- ${c.id ? `[${c.id}] ` : ""}${c.description}${c.command ? ` — \`${c.command}\`` : ""}`);
  if (plan.risks?.length) {
    lines.push("", "# Risks");
    for (const r of plan.risks) lines.push(`- ${r}`);
  }
  return `${lines.join("\n")}\n`;
}

/** A unified diff (git style, so a diff viewer can parse it) between two plan versions. */
export function planDiff({ from, to, fromVersion, toVersion }: { from: PlanDocument; to: PlanDocument; fromVersion: number; toVersion: number }): string {
  const patch = createTwoFilesPatch(`a/plan-v${fromVersion}.md`, `b/plan-v${toVersion}.md`, planToText(from), planToText(to), undefined, undefined, {
    context: 3,
  });
  // jsdiff writes "Index:" + "====" headers; a git-style header is what unified-diff parsers expect.
  const body = patch.split("\n").filter((l) => !l.startsWith("Index:") && !/^=+$/.test(l));
  return [`diff --git a/plan-v${fromVersion}.md b/plan-v${toVersion}.md`, ...body].join("\n");
}

/** Whether a unified diff contains any change hunk. */
export function hasChanges(diff: string): boolean {
  return /^@@ /m.test(diff);
}
