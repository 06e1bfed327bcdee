import { AppError } from "@/lib/errors";
import { commitMessage } from "./commit-files";
import { git, gitOut, resolveCommit } from "./run";

/*
 * Parallel tasks (limits.maxConcurrentTasks): each task works on its own branch, cut from the run branch once its
 * dependencies are merged, and is merged back into the run branch by host-side git with the hardened configuration
 * (./run.ts) — `git merge-tree` computes the three-way merge without any working tree, so nothing from the task's
 * worktree (its config, hooks, attributes on disk) takes part.
 */

/** A task's branch: the run branch with the task id appended (only characters a branch name may hold). */
export function taskBranchName(runBranch: string, taskId: string): string {
  const id = taskId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 40) || "task";
  return `${runBranch}--${id}`;
}

/**
 * (Re)cut the task's branch at the run branch's tip: the task starts from everything merged so far. The task's
 * worktree must be gone (its sandbox released) first. Returns the commit it starts from.
 */
export async function cutTaskBranch({ repoPath, runBranch, branch }: { repoPath: string; runBranch: string; branch: string }): Promise<string> {
  const tip = await resolveCommit(repoPath, `refs/heads/${runBranch}`);
  if (!tip) throw new AppError("not_found:git", `Branch ${runBranch} does not exist.`);
  await git(repoPath, ["update-ref", `refs/heads/${branch}`, tip]);
  return tip;
}

/**
 * Delete a task's branch (once merged, or when the run is cancelled): only if it still points at `expected` when given
 * (compare-and-swap), and quietly when it is gone already. The run branch keeps every merged commit.
 */
export async function deleteTaskBranch({ repoPath, branch, expected }: { repoPath: string; branch: string; expected?: string }): Promise<void> {
  await git(repoPath, ["update-ref", "-d", `refs/heads/${branch}`, ...(expected ? [expected] : [])], { allowFailure: true });
}

/** A conflicting file as a person sees it at the conflict gate: the run branch's side and the task's side. */
export type ConflictSide = { path: string; runBranch: string | null; task: string | null };

export type TaskMergeResult =
  | { status: "merged"; sha: string }
  | { status: "up_to_date"; sha: string }
  | { status: "conflict"; files: string[]; sides: ConflictSide[] };

/** How much of each side of a conflicting file the gate shows. */
const SIDE_CHARS = 4_000;
const SIDE_FILES = 10;

async function sideOf(repoPath: string, commit: string, file: string): Promise<string | null> {
  const r = await git(repoPath, ["cat-file", "blob", `${commit}:${file}`], { allowFailure: true });
  if (r.code !== 0) return null;
  return r.stdout.length > SIDE_CHARS ? `${r.stdout.slice(0, SIDE_CHARS)}\n[… cut at ${SIDE_CHARS} characters]` : r.stdout;
}

/**
 * Merge the task's branch into the run branch: a merge commit (run branch first parent, task second) whose tree is
 * `git merge-tree`'s, the run branch moved by compare-and-swap. Idempotent: a task branch already contained in the run
 * branch (a re-run step after a crash) is `up_to_date`. A conflict changes nothing and names the files with both sides.
 */
export async function mergeTaskBranch({
  repoPath,
  runBranch,
  branch,
  runId,
  taskId,
  title,
}: {
  repoPath: string;
  runBranch: string;
  branch: string;
  runId: string;
  taskId: string;
  title: string;
}): Promise<TaskMergeResult> {
  const ref = `refs/heads/${runBranch}`;
  for (let attempt = 1; ; attempt++) {
    const tip = await resolveCommit(repoPath, ref);
    const head = await resolveCommit(repoPath, `refs/heads/${branch}`);
    if (!tip) throw new AppError("not_found:git", `Branch ${runBranch} does not exist.`);
    if (!head) throw new AppError("not_found:git", `Branch ${branch} does not exist.`);
    const contained = await git(repoPath, ["merge-base", "--is-ancestor", head, tip], { allowFailure: true });
    if (contained.code === 0) return { status: "up_to_date", sha: (await mergeCommitOf(repoPath, tip, head)) ?? tip };
    const merged = await git(repoPath, ["merge-tree", "--write-tree", "--name-only", "--no-messages", tip, head], { allowFailure: true });
    const [tree = "", ...rest] = merged.stdout.split("\n");
    if (merged.code === 1) {
      const files = [...new Set(rest.map((l) => l.trim()).filter(Boolean))];
      const sides: ConflictSide[] = [];
      for (const file of files.slice(0, SIDE_FILES)) {
        sides.push({ path: file, runBranch: await sideOf(repoPath, tip, file), task: await sideOf(repoPath, head, file) });
      }
      return { status: "conflict", files, sides };
    }
    if (merged.code !== 0) throw new AppError("internal:git", `git merge-tree failed: ${merged.stderr.trim().slice(0, 500)}`);
    const message = commitMessage({ subject: `Merge task ${taskId}: ${title}`, runId, kind: "merge", taskId });
    const sha = await gitOut(repoPath, ["commit-tree", tree.trim(), "-p", tip, "-p", head, "-F", "-"], { input: message });
    const moved = await git(repoPath, ["update-ref", ref, sha, tip], { allowFailure: true });
    if (moved.code === 0) return { status: "merged", sha };
    if (attempt >= 5) throw new AppError("conflict:git", `Branch ${runBranch} kept moving while merging task ${taskId}.`);
  }
}

/** The merge commit on the run branch that brought `head` in (its second parent), looked for among the newest merges. */
async function mergeCommitOf(repoPath: string, tip: string, head: string): Promise<string | null> {
  const out = await git(repoPath, ["rev-list", "--merges", "--parents", "--max-count=200", tip], { allowFailure: true });
  for (const line of out.stdout.split("\n")) {
    const [sha, , second] = line.trim().split(" ");
    if (sha && second === head) return sha;
  }
  return null;
}
