import { spawn } from "node:child_process";
import { baseChildEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";

/** Every commit Gatehouse makes is authored and committed by this identity, independent of any git config. */
export const GATEHOUSE_IDENTITY = { name: "Gatehouse", email: "gatehouse@localhost" } as const;

/**
 * Options given to every git invocation: repository hooks never run (a hook is code from the repository), no signing
 * prompts, no pager, no credential prompts.
 */
const SAFE_CONFIG = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "commit.gpgSign=false",
  "-c",
  "tag.gpgSign=false",
  "-c",
  "core.autocrlf=false",
  "-c",
  "core.quotePath=false",
  "-c",
  "advice.detachedHead=false",
];

export function gitEnv(extra: Record<string, string> = {}): Record<string, string> {
  return baseChildEnv({
    GIT_AUTHOR_NAME: GATEHOUSE_IDENTITY.name,
    GIT_AUTHOR_EMAIL: GATEHOUSE_IDENTITY.email,
    GIT_COMMITTER_NAME: GATEHOUSE_IDENTITY.name,
    GIT_COMMITTER_EMAIL: GATEHOUSE_IDENTITY.email,
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_PAGER: "cat",
    ...extra,
  });
}

export type GitResult = { stdout: string; stderr: string; code: number };

/**
 * Run the git CLI with an argument array in `cwd`. We call git directly rather than through simple-git because the
 * plumbing used here needs stdin (hash-object, cat-file --batch, commit-tree) and an exactly controlled environment.
 * Throws AppError internal:git on a non-zero exit unless `allowFailure`.
 */
export function git(
  cwd: string,
  args: string[],
  { input, env, allowFailure = false }: { input?: string | Buffer; env?: Record<string, string>; allowFailure?: boolean } = {},
): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", [...SAFE_CONFIG, ...args], { cwd, env: gitEnv(env) as NodeJS.ProcessEnv, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.stdin.on("error", () => {});
    child.stdin.end(input ?? "");
    child.on("error", (error) => reject(new AppError("internal:git", `git could not be started: ${error.message}`, { cause: error })));
    child.on("close", (code) => {
      const result = { stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8"), code: code ?? 1 };
      if (result.code !== 0 && !allowFailure) {
        reject(
          new AppError("internal:git", `git ${args[0]} failed (exit ${result.code}): ${result.stderr.trim().slice(0, 2000)}`, {
            details: { args: args.slice(0, 6) },
          }),
        );
      } else resolve(result);
    });
  });
}

/** `git … ` returning trimmed stdout. */
export async function gitOut(cwd: string, args: string[], options?: Parameters<typeof git>[2]): Promise<string> {
  return (await git(cwd, args, options)).stdout.trim();
}

/** The commit a ref names, or null when it does not exist. */
export async function resolveCommit(repoPath: string, ref: string): Promise<string | null> {
  const r = await git(repoPath, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`], { allowFailure: true });
  return r.code === 0 ? r.stdout.trim() : null;
}

/** The repository's shared git directory (absolute), also for a linked worktree. */
export async function commonGitDir(repoPath: string): Promise<string> {
  return gitOut(repoPath, ["rev-parse", "--path-format=absolute", "--git-common-dir"]);
}

export type WorktreeInfo = { path: string; head: string | null; branch: string | null; bare: boolean };

export async function listWorktrees(repoPath: string): Promise<WorktreeInfo[]> {
  const text = await gitOut(repoPath, ["worktree", "list", "--porcelain"]);
  const out: WorktreeInfo[] = [];
  for (const block of text.split(/\n\n+/)) {
    const info: WorktreeInfo = { path: "", head: null, branch: null, bare: false };
    for (const line of block.split("\n")) {
      if (line.startsWith("worktree ")) info.path = line.slice(9);
      else if (line.startsWith("HEAD ")) info.head = line.slice(5);
      else if (line.startsWith("branch ")) info.branch = line.slice(7).replace(/^refs\/heads\//, "");
      else if (line === "bare") info.bare = true;
    }
    if (info.path) out.push(info);
  }
  return out;
}
