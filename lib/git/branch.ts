import { AppError } from "@/lib/errors";
import { branchNameFor } from "@/lib/db/queries/runs";
import { git, resolveCommit, resolveRefs } from "./run";

/**
 * Create the run's branch `autonomous/<run-id>-<slug>` from the latest base branch (the remote-tracking copy when it is
 * ahead of the local one, e.g. after `git fetch`). Idempotent: an existing branch is returned as it is.
 *
 * A follow-up run (`existingBranch`, a pull request's branch) creates nothing: it continues that branch, and its
 * starting point (`baseSha`, what its diff and checks measure from) is the branch's tip, so the earlier run's work is
 * not counted as its own.
 *
 * `branch` is the name stored when the run was created; a run always passes it, so the branch keeps that name even if
 * the way names are derived from a request changes in between (the request-derived name is for callers without a run).
 */
export async function createRunBranch({
  repoPath,
  runId,
  request,
  baseBranch,
  existingBranch,
  branch: storedBranch,
}: {
  repoPath: string;
  runId: string;
  request: string;
  branch?: string | null;
  baseBranch: string;
  existingBranch?: string;
}): Promise<{ branch: string; baseSha: string; created: boolean }> {
  if (existingBranch) {
    const tip = await resolveCommit(repoPath, `refs/heads/${existingBranch}`);
    if (!tip) throw new AppError("not_found:git", `The branch ${existingBranch} this follow-up run continues does not exist any more.`);
    return { branch: existingBranch, baseSha: tip, created: false };
  }
  const branch = storedBranch || branchNameFor({ runId, request });
  // The run branch and both bases, read with one process.
  const refs = await resolveRefs(repoPath, [`refs/heads/${branch}`, `refs/heads/${baseBranch}`, `refs/remotes/origin/${baseBranch}`]);
  const baseSha = await newestOf({ repoPath, baseBranch, local: refs.get(`refs/heads/${baseBranch}`), remote: refs.get(`refs/remotes/origin/${baseBranch}`) });
  if (refs.has(`refs/heads/${branch}`)) return { branch, baseSha, created: false };
  await git(repoPath, ["branch", "--no-track", branch, baseSha]);
  return { branch, baseSha, created: true };
}

/** The newest commit of the base branch: local, or origin's when origin's contains the local one. */
export async function latestBase({ repoPath, baseBranch }: { repoPath: string; baseBranch: string }): Promise<string> {
  const refs = await resolveRefs(repoPath, [`refs/heads/${baseBranch}`, `refs/remotes/origin/${baseBranch}`]);
  return newestOf({ repoPath, baseBranch, local: refs.get(`refs/heads/${baseBranch}`), remote: refs.get(`refs/remotes/origin/${baseBranch}`) });
}

async function newestOf({ repoPath, baseBranch, local, remote }: { repoPath: string; baseBranch: string; local?: string; remote?: string }): Promise<string> {
  if (local && remote && local !== remote) {
    const ff = await git(repoPath, ["merge-base", "--is-ancestor", local, remote], { allowFailure: true });
    if (ff.code === 0) return remote;
  }
  const sha = local ?? remote;
  if (!sha) throw new AppError("not_found:git", `Base branch "${baseBranch}" does not exist in the repository.`);
  return sha;
}
