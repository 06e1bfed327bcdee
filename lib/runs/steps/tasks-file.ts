import { AppError } from "@/lib/errors";
import { checkTask, PASTED_TASKS_MD_PATH, pastedTasksMd, planFromTasksMd, TASKS_MD_PATHS } from "@/lib/agents/tasks-md";
import { validateMermaid } from "@/lib/mermaid";
import { commitFiles, commitMessage, readFileAt } from "@/lib/git";
import type { PlanDocument } from "@/lib/workflow";
import { firstLine, type RunContext } from "./context";

/* A run from a tasks.md: its tasks are the plan, and its checkboxes are checked as tasks are done (or triaged). */

/**
 * A run started from a tasks.md (config `tasks.source`): one pasted into the request (committed to the branch as
 * .autonomous/tasks.md, where its checkboxes are kept), or with `repository` tasks.md / .autonomous/tasks.md on the
 * branch. Its tasks are the plan; no planner call is made. Null: the planner plans.
 */
export async function planFromTasksFile(run: RunContext): Promise<{ kind: "plan"; plan: PlanDocument; diagramsProduced: number } | { kind: "invalid"; message: string; diagramsProduced: number; draft: null } | null> {
  const source = run.config.tasks?.source ?? "auto";
  if (source === "none") return null;
  let found: { path: string; text: string } | null = null;
  const pasted = pastedTasksMd(run.request);
  if (pasted !== null) found = { path: PASTED_TASKS_MD_PATH, text: pasted };
  else if (source === "repository") {
    for (const path of TASKS_MD_PATHS) {
      const text = await readFileAt({ repoPath: run.repoPath, ref: run.branch, path });
      if (text !== null) {
        found = { path, text };
        break;
      }
    }
    if (!found) return { kind: "invalid", message: `tasks.source is "repository" but neither ${TASKS_MD_PATHS.join(" nor ")} is on the branch.`, diagramsProduced: 0, draft: null };
  }
  if (!found) return null;
  let plan: PlanDocument;
  try {
    plan = planFromTasksMd({ text: found.text, path: found.path, title: firstLine(run.request) });
    await validateMermaid(plan.mermaid);
  } catch (error) {
    if (error instanceof AppError) return { kind: "invalid", message: error.message, diagramsProduced: 0, draft: null };
    throw error;
  }
  if (pasted !== null) {
    await commitFiles({
      repoPath: run.repoPath,
      branch: run.branch,
      files: { [found.path]: found.text },
      message: commitMessage({ subject: `tasks.md for run ${run.runId}`, runId: run.runId, kind: "records" }),
    });
  }
  return { kind: "plan", plan, diagramsProduced: 0 };
}

/**
 * The run's tasks.md with tasks checked, as it would be committed on top of `at` (a commit or tree id: default the run branch),
 * or null when there is nothing to change (no tasks.md, already checked, or made unparseable by the implementer).
 */
export async function checkedTasksFile(run: RunContext, doc: PlanDocument, taskIds: string[], at?: string): Promise<{ files: Record<string, string>; message: string } | null> {
  const path = doc.tasksFile?.path;
  if (!path || !taskIds.length) return null;
  const text = await readFileAt({ repoPath: run.repoPath, ref: at ?? run.branch, path });
  if (text === null) return null;
  let next = text;
  try {
    for (const id of taskIds) next = checkTask(next, id);
  } catch {
    // The implementer made the file unparseable: its checkboxes are left as they are.
    return null;
  }
  if (next === text) return null;
  return { files: { [path]: next }, message: commitMessage({ subject: `${path}: ${taskIds.join(", ")} done (run ${run.runId})`, runId: run.runId, kind: "records" }) };
}

/**
 * Check tasks in the run's tasks.md and commit it on the branch (a no-op when they already are). The sandbox gets the
 * new file too (an E2B sandbox is not the worktree), so the next checkpoint keeps the boxes.
 */
export async function checkTasksFile(run: RunContext, doc: PlanDocument, taskIds: string[], sandbox?: { writeFile(path: string, content: string): Promise<void> }) {
  const checked = await checkedTasksFile(run, doc, taskIds);
  if (!checked) return;
  await commitFiles({ repoPath: run.repoPath, branch: run.branch, files: checked.files, message: checked.message });
  const [path, next] = Object.entries(checked.files)[0]!;
  if (sandbox && !path.startsWith(".autonomous/")) await sandbox.writeFile(path, next);
}
