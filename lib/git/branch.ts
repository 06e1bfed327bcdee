import { AppError } from "@/lib/errors";
import { branchNameFor } from "@/lib/db/queries/runs";
import { git, resolveCommit } from "./run";

/**
 * Create the run's branch `autonomous/<run-id>-<slug>` from the latest base branch (the remote-tracking copy when it is
 * ahead of the local one, e.g. after `git fetch`). Idempotent: an existing branch is returned as it is.
 */
export async function createRunBranch({
  repoPath,
  runId,
  request,
  baseBranch,
}: {
  repoPath: string;
  runId: string;
  request: string;
  baseBranch: string;
}): Promise<{ branch: string; baseSha: string; created: boolean }> {
  const branch = branchNameFor({ runId, request });
  const existing = await resolveCommit(repoPath, `refs/heads/${branch}`);
  const baseSha = await latestBase({ repoPath, baseBranch });
  if (existing) return { branch, baseSha, created: false };
  await git(repoPath, ["branch", "--no-track", branch, baseSha]);
  return { branch, baseSha, created: true };
}

/** The newest commit of the base branch: local, or origin's when origin's contains the local one. */
export async function latestBase({ repoPath, baseBranch }: { repoPath: string; baseBranch: string }): Promise<string> {
  const local = await resolveCommit(repoPath, `refs/heads/${baseBranch}`);
  const remote = await resolveCommit(repoPath, `refs/remotes/origin/${baseBranch}`);
  if (local && remote && local !== remote) {
    const ff = await git(repoPath, ["merge-base", "--is-ancestor", local, remote], { allowFailure: true });
    if (ff.code === 0) return remote;
  }
  const sha = local ?? remote;
  if (!sha) throw new AppError("not_found:git", `Base branch "${baseBranch}" does not exist in the repository.`);
  return sha;
}
