import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { excludePathspecs } from "./pathspecs";
import type { Sandbox } from "@/lib/sandbox/types";
import { commitMessage } from "./commit-files";
import { git, gitOut, stageWorktree, type WorktreeLocation } from "./run";

/** What checkpoints need from a sandbox: the local worktree that git works on (local sandbox, or E2B's mirror). */
export type GitWorkspace = Pick<Sandbox, "kind"> & {
  workspacePath?: string;
  /** The worktree's real git directory; host git never discovers it from the (sandbox-writable) worktree. */
  location?: WorktreeLocation;
  excludePaths?: string[];
  syncToWorkspace?: () => Promise<void>;
};

function workspaceOf(sandbox: GitWorkspace, withhold: string[] = []): { dir: string; worktree: WorktreeLocation; excludes: string[] } {
  if (!sandbox.workspacePath || !sandbox.location) {
    throw new AppError("internal:git", `A ${sandbox.kind} sandbox without a local workspace cannot be committed.`);
  }
  return {
    dir: sandbox.workspacePath,
    worktree: sandbox.location,
    excludes: excludePathspecs([".autonomous", ...(sandbox.excludePaths ?? []), ...withhold.map(literalPathspec)]),
  };
}

/** A file's path as a glob pathspec that matches only that file (`*`, `?`, `[` and `\\` escaped), from the root. */
const literalPathspec = (file: string) => `/${file.replace(/[*?[\]\\]/g, "\\$&")}`;

export type Checkpoint = { sha: string; tree: string };

async function commitWorkspace(sandbox: GitWorkspace, message: string, withhold: string[] = []): Promise<Checkpoint> {
  await sandbox.syncToWorkspace?.();
  const { dir, worktree, excludes } = workspaceOf(sandbox, withhold);
  // Excluded paths and Gatehouse's own records are never staged from the workspace.
  await stageWorktree(worktree, excludes);
  await git(dir, ["commit", "--quiet", "--allow-empty", "--no-verify", "-F", "-"], { input: message, worktree });
  // The commit and its tree with one process (a checkpoint sits on the session's closing turn, on a lane's critical path).
  const [sha = "", tree = ""] = (await gitOut(dir, ["rev-parse", "HEAD", "HEAD^{tree}"], { worktree })).split("\n");
  return { sha, tree };
}

/**
 * Take back changes to these files: each restored to `base` (a file new since then deleted, a changed or deleted one
 * restored), in one commit on the run branch, with host git on the worktree's real git directory.
 */
export async function restoreFilesToBase({
  sandbox,
  runId,
  base,
  files,
  reason,
}: {
  sandbox: GitWorkspace;
  runId: string;
  base: string;
  files: string[];
  reason: string;
}): Promise<Checkpoint> {
  await sandbox.syncToWorkspace?.();
  const { dir, worktree } = workspaceOf(sandbox);
  for (const file of files) {
    const target = path.resolve(dir, file);
    if (!target.startsWith(`${path.resolve(dir)}${path.sep}`)) throw new AppError("internal:git", `Not a path in the worktree: ${file}`);
    const spec = `:(literal)${file}`;
    const inBase = (await git(dir, ["cat-file", "-e", `${base}:${file}`], { worktree, allowFailure: true })).code === 0;
    if (inBase) await git(dir, ["checkout", "--quiet", base, "--", spec], { worktree });
    else {
      await git(dir, ["rm", "-r", "-f", "--quiet", "--cached", "--ignore-unmatch", "--", spec], { worktree });
      await fs.rm(target, { recursive: true, force: true });
    }
  }
  return commitWorkspace(
    sandbox,
    commitMessage({ subject: `Out-of-scope changes taken back (run ${runId})`, runId, kind: "scope-revert", body: `${reason}

${files.map((f) => `- ${f}`).join("\n")}` }),
  );
}

/** One commit per implementation task, on the run branch checked out in the sandbox's worktree. */
export function commitCheckpoint({
  sandbox,
  runId,
  taskId,
  title,
}: {
  sandbox: GitWorkspace;
  runId: string;
  taskId: string;
  title: string;
}): Promise<Checkpoint> {
  return commitWorkspace(sandbox, commitMessage({ subject: `Task ${taskId}: ${title} (run ${runId})`, runId, taskId, kind: "checkpoint" }));
}

/**
 * Whether a checkpoint made now would change nothing: the worktree, as a checkpoint stages it (excluded paths and
 * Gatehouse's records left out, ignored files too), is exactly what HEAD has. One git process; anything it cannot say
 * for sure (a nested repository, an error) reads as "something to commit".
 */
export async function nothingToCommit(sandbox: GitWorkspace): Promise<boolean> {
  const { dir, worktree, excludes } = workspaceOf(sandbox);
  const status = await git(dir, ["status", "--porcelain", "-z", "--untracked-files=all", "--", ".", ...excludes], { worktree, allowFailure: true });
  return status.code === 0 && status.stdout === "";
}

/**
 * Before a pause: commit the work in progress to the run branch, so the sandbox can be destroyed while the run waits.
 * The returned tree hash is what restoreSandbox() checks on resume.
 */
export function commitWorkInProgress({
  sandbox,
  runId,
  reason,
  withhold,
}: {
  sandbox: GitWorkspace;
  runId: string;
  reason: string;
  /** Files (worktree paths) left out of the commit: their changes hold a secret. */
  withhold?: string[];
}): Promise<Checkpoint> {
  return commitWorkspace(sandbox, commitMessage({ subject: `WIP before pause: ${reason} (run ${runId})`, runId, kind: "wip" }), withhold);
}

/** The tree hash of what is in the workspace now (as a checkpoint would commit it), without committing. */
export async function workspaceTree(sandbox: GitWorkspace): Promise<string> {
  const { dir, worktree, excludes } = workspaceOf(sandbox);
  const index = path.join(os.tmpdir(), `gatehouse-index-${newId("art")}`);
  const env = { GIT_INDEX_FILE: index };
  try {
    await git(dir, ["read-tree", "HEAD"], { env, worktree });
    await stageWorktree(worktree, excludes, { env });
    return await gitOut(dir, ["write-tree"], { env, worktree });
  } finally {
    await fs.rm(index, { force: true });
  }
}

/** The newest commit on the workspace's HEAD that is not a WIP commit: the last task checkpoint (or the plan). */
export async function lastCheckpoint(sandbox: GitWorkspace): Promise<string> {
  const { dir, worktree } = workspaceOf(sandbox);
  return gitOut(dir, ["log", "-1", "--format=%H", "--invert-grep", "--grep=^Gatehouse-Kind: wip$", "HEAD"], { worktree });
}

/**
 * A failed task rolls back to its last checkpoint: the worktree and the run branch return to that commit, and files
 * the task created are removed (ignored and excluded files are kept). For E2B, destroy the sandbox and restore a fresh
 * one from the branch afterwards; this resets the local mirror only.
 */
export async function rollbackToCheckpoint({ sandbox, sha }: { sandbox: GitWorkspace; sha?: string }): Promise<Checkpoint> {
  const { dir, worktree } = workspaceOf(sandbox);
  const target = sha ?? (await lastCheckpoint(sandbox));
  await git(dir, ["reset", "--hard", "--quiet", target], { worktree });
  const keep = (sandbox.excludePaths ?? []).flatMap((p) => ["-e", p]);
  await git(dir, ["clean", "-fd", "--quiet", ...keep], { worktree });
  return { sha: target, tree: await gitOut(dir, ["rev-parse", `${target}^{tree}`], { worktree }) };
}
