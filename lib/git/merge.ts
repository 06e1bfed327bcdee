import { AppError } from "@/lib/errors";
import { commitMessage } from "./commit-files";
import { git, gitOut, listWorktrees, resolveCommit, worktreeLocation } from "./run";

export type MergeResult =
  | { status: "merged"; sha: string; baseSha: string }
  | { status: "up_to_date"; sha: string }
  | { status: "conflict"; files: string[]; reason: string };

/**
 * Squash-merge the run branch into the base branch: one commit on the base whose tree is the three-way merge of both
 * (computed with `git merge-tree`, so no working tree is touched). A conflicting base reports the conflicting files and
 * changes nothing. When the base is checked out somewhere (the user's clone), it is fast-forwarded there, and only if
 * that checkout is clean.
 */
export async function squashMerge({
  repoPath,
  branch,
  baseBranch,
  runId,
  title,
}: {
  repoPath: string;
  branch: string;
  baseBranch: string;
  runId: string;
  title: string;
}): Promise<MergeResult> {
  const baseRef = `refs/heads/${baseBranch}`;
  const baseSha = await resolveCommit(repoPath, baseRef);
  const head = await resolveCommit(repoPath, `refs/heads/${branch}`);
  if (!baseSha) throw new AppError("not_found:git", `Base branch ${baseBranch} does not exist.`);
  if (!head) throw new AppError("not_found:git", `Branch ${branch} does not exist.`);

  const merged = await git(repoPath, ["merge-tree", "--write-tree", "--name-only", "--no-messages", baseSha, head], { allowFailure: true });
  const [tree = "", ...rest] = merged.stdout.split("\n");
  if (merged.code === 1) {
    const files = [...new Set(rest.map((l) => l.trim()).filter(Boolean))];
    return { status: "conflict", files, reason: `${files.length} file(s) conflict with changes on ${baseBranch}` };
  }
  if (merged.code !== 0) throw new AppError("internal:git", `git merge-tree failed: ${merged.stderr.trim().slice(0, 500)}`);
  if (tree.trim() === (await gitOut(repoPath, ["rev-parse", `${baseSha}^{tree}`]))) return { status: "up_to_date", sha: baseSha };

  const message = commitMessage({ subject: `${title} (run ${runId}, squashed from ${branch})`, runId, kind: "merge" });
  const sha = await gitOut(repoPath, ["commit-tree", tree.trim(), "-p", baseSha, "-F", "-"], { input: message });

  const checkout = (await listWorktrees(repoPath)).find((w) => !w.bare && w.branch === baseBranch);
  const worktree = checkout ? await worktreeLocation({ repoPath, workTree: checkout.path }) : null;
  if (checkout && worktree) {
    // Names only (staged or not): porcelain lines start with a status column that trimming the output would shift.
    const dirty = await gitOut(checkout.path, ["diff", "--name-only", "HEAD"], { worktree });
    if (dirty) {
      const files = dirty.split("\n").filter(Boolean);
      return { status: "conflict", files, reason: `the checkout of ${baseBranch} at ${checkout.path} has uncommitted changes` };
    }
    const ff = await git(checkout.path, ["merge", "--ff-only", "--quiet", sha], { allowFailure: true, worktree });
    if (ff.code !== 0) {
      return { status: "conflict", files: [], reason: `could not fast-forward ${baseBranch}: ${ff.stderr.trim().slice(0, 300)}` };
    }
  } else {
    const moved = await git(repoPath, ["update-ref", baseRef, sha, baseSha], { allowFailure: true });
    if (moved.code !== 0) return { status: "conflict", files: [], reason: `${baseBranch} moved during the merge; retry` };
  }
  return { status: "merged", sha, baseSha };
}
