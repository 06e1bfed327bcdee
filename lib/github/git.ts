import fs from "node:fs/promises";
import path from "node:path";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { git, resolveCommit } from "@/lib/git";
import { redact } from "@/lib/redact";
import { repoOctokit, withInstallationToken, type RepositoryRef } from "./app";

/*
 * Git over HTTPS with an installation token. The token reaches git only through the environment of that one git
 * process (GIT_CONFIG_* → http.extraHeader), so it is never written into .git/config, a remote URL, an argument list
 * (visible in `ps`) or a reflog. Each GitHub repository has one bare cache clone under <dataDir>/repos/<owner>/<repo>.git;
 * the local git code (branches, worktrees, records, memory) works on it exactly as on a local project's repository.
 */

export class GitUnauthorizedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GitUnauthorizedError";
  }
}

const isUnauthorized = (error: unknown) => error instanceof GitUnauthorizedError || (error as { status?: number })?.status === 401;

/** Environment entries that authenticate one git process; never logged. */
function authEnv(token: string): Record<string, string> {
  const basic = Buffer.from(`x-access-token:${token}`).toString("base64");
  return {
    GIT_CONFIG_COUNT: "2",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
    // No credential helper may store or offer anything for this URL.
    GIT_CONFIG_KEY_1: "credential.helper",
    GIT_CONFIG_VALUE_1: "",
  };
}

async function remoteGit(cwd: string, args: string[], token: string, what: string) {
  const result = await git(cwd, args, { env: authEnv(token), allowFailure: true });
  if (result.code === 0) return result;
  const stderr = redact(result.stderr, [token]).trim().slice(0, 1000);
  if (/\b401\b|Authentication failed|could not read Username|terminal prompts disabled/i.test(stderr)) {
    throw new GitUnauthorizedError(`git ${what} was refused: ${stderr}`);
  }
  throw new AppError("internal:git", `git ${what} failed (exit ${result.code}): ${stderr}`);
}

export function cachePath(ref: RepositoryRef): string {
  return path.join(getEnv().dataDir, "repos", ref.owner.toLowerCase(), `${ref.repo.toLowerCase()}.git`);
}

/** One git operation at a time per cache clone in this process (fetches into one repository would race on ref locks). */
const locks = new Map<string, Promise<unknown>>();
async function exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const previous = locks.get(key) ?? Promise.resolve();
  const next = previous.catch(() => null).then(fn);
  locks.set(key, next);
  try {
    return await next;
  } finally {
    if (locks.get(key) === next) locks.delete(key);
  }
}

/** The repository's clone URL and default branch, as GitHub reports them (GitHub Enterprise and tests included). */
export async function repositoryInfo(ref: RepositoryRef): Promise<{ cloneUrl: string; defaultBranch: string; htmlUrl: string }> {
  const { data } = await repoOctokit(ref).request("GET /repos/{owner}/{repo}", { owner: ref.owner, repo: ref.repo });
  return { cloneUrl: data.clone_url, defaultBranch: data.default_branch, htmlUrl: data.html_url };
}

/**
 * Bring the cache clone up to date with the base branch on GitHub (creating the clone on first use), and with
 * `branches` (a follow-up run's pull request branch), forced: GitHub's copy is the truth. Returns its path and the base
 * commit.
 */
export async function syncRepository({
  ref,
  baseBranch,
  branches = [],
}: {
  ref: RepositoryRef;
  baseBranch: string;
  branches?: string[];
}): Promise<{ repoPath: string; baseSha: string }> {
  const repoPath = cachePath(ref);
  const { cloneUrl } = await repositoryInfo(ref);
  return exclusive(repoPath, async () => {
    if (!(await fs.stat(path.join(repoPath, "HEAD")).catch(() => null))) {
      await fs.mkdir(repoPath, { recursive: true });
      await git(repoPath, ["init", "--bare", "--quiet", "--initial-branch", baseBranch]);
    }
    await withInstallationToken(
      ref,
      `fetching ${baseBranch}`,
      (token) =>
        remoteGit(
          repoPath,
          ["fetch", "--quiet", "--no-tags", "--update-head-ok", cloneUrl, ...[baseBranch, ...branches].map((b) => `+refs/heads/${b}:refs/heads/${b}`)],
          token,
          "fetch",
        ),
      isUnauthorized,
    );
    const baseSha = await resolveCommit(repoPath, `refs/heads/${baseBranch}`);
    if (!baseSha) throw new AppError("not_found:git", `Base branch "${baseBranch}" does not exist in ${ref.owner}/${ref.repo}.`);
    return { repoPath, baseSha };
  });
}

/** Push the run branch to GitHub (forced: the branch is the run's own, and a fix attempt may have rolled it back). */
export async function pushBranch({ ref, branch }: { ref: RepositoryRef; branch: string }): Promise<{ sha: string }> {
  const repoPath = cachePath(ref);
  const { cloneUrl } = await repositoryInfo(ref);
  return exclusive(repoPath, async () => {
    const sha = await resolveCommit(repoPath, `refs/heads/${branch}`);
    if (!sha) throw new AppError("not_found:git", `Branch ${branch} does not exist in the cache of ${ref.owner}/${ref.repo}.`);
    await withInstallationToken(
      ref,
      `pushing ${branch}`,
      (token) => remoteGit(repoPath, ["push", "--quiet", "--no-verify", cloneUrl, `+refs/heads/${branch}:refs/heads/${branch}`], token, "push"),
      isUnauthorized,
    );
    return { sha };
  });
}
