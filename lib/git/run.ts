import fs from "node:fs/promises";
import path from "node:path";
import { baseChildEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { runChild } from "./spawner";

/** Every commit Gatehouse makes is authored and committed by this identity, independent of any git config. */
export const GATEHOUSE_IDENTITY = { name: "Gatehouse", email: "gatehouse@localhost" } as const;

/**
 * Options given to every git invocation. Command-line config outranks every config file, so none of these can be
 * switched back on by a repository (nor by a nested repository git may visit: `-c` options reach child gits through
 * GIT_CONFIG_PARAMETERS). Nothing git could run as a program is left enabled: hooks, the fsmonitor hook, pagers, ssh,
 * credential helpers, the `ext::` transport, submodule recursion; nothing is signed and nothing prompts. Diffs also pass
 * --no-ext-diff --no-textconv (see DIFF_SAFE).
 */
export const SAFE_CONFIG: readonly string[] = [
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "core.untrackedCache=false",
  "core.pager=cat",
  "core.sshCommand=false",
  "core.askPass=",
  "credential.helper=",
  "commit.gpgSign=false",
  "tag.gpgSign=false",
  "gpg.program=false",
  "diff.ignoreSubmodules=all",
  "status.submoduleSummary=false",
  "submodule.recurse=false",
  "protocol.ext.allow=never",
  "core.autocrlf=false",
  "core.quotePath=false",
  "advice.detachedHead=false",
].flatMap((setting) => ["-c", setting]);

export function gitEnv(extra: Record<string, string> = {}): Record<string, string> {
  return baseChildEnv({
    GIT_AUTHOR_NAME: GATEHOUSE_IDENTITY.name,
    GIT_AUTHOR_EMAIL: GATEHOUSE_IDENTITY.email,
    GIT_COMMITTER_NAME: GATEHOUSE_IDENTITY.name,
    GIT_COMMITTER_EMAIL: GATEHOUSE_IDENTITY.email,
    GIT_TERMINAL_PROMPT: "0",
    // No system or global config, no system attributes: only the repository's own config (never sandbox-writable) and
    // SAFE_CONFIG apply. baseChildEnv() passes no GIT_DIR/GIT_WORK_TREE/GIT_CONFIG_* from the server's environment.
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_PAGER: "cat",
    GIT_EDITOR: "false",
    GIT_OPTIONAL_LOCKS: "0",
    ...extra,
  });
}

/** Flags for every host-side diff: no external diff program, no textconv filter. */
export const DIFF_SAFE = ["--no-ext-diff", "--no-textconv"] as const;

export type GitResult = { stdout: string; stderr: string; code: number };

/**
 * A sandbox's worktree as host git must see it: the work tree as plain files, and the git directory Gatehouse knows it
 * has (`<repo>/.git/worktrees/<name>`), never the one the work tree's `.git` entry names.
 */
export type WorktreeLocation = { gitDir: string; workTree: string };

export type GitOptions = {
  input?: string | Buffer;
  env?: Record<string, string>;
  allowFailure?: boolean;
  /** Run on this worktree with an explicit git dir and work tree (no discovery from `cwd`). */
  worktree?: WorktreeLocation;
};

/**
 * Run the git CLI with an argument array in `cwd`. We call git directly rather than through simple-git because the
 * plumbing used here needs stdin (hash-object, cat-file --batch, commit-tree) and an exactly controlled environment.
 * Throws AppError internal:git on a non-zero exit unless `allowFailure`.
 */
export function git(
  cwd: string,
  args: string[],
  { input, env, allowFailure = false, worktree }: GitOptions = {},
): Promise<GitResult> {
  // A linked worktree's own `.git` is a file that its sandbox can rewrite; git is pointed at the real one instead.
  const location = worktree ? ["--git-dir", worktree.gitDir, "--work-tree", worktree.workTree] : [];
  // Spawned by the helper (./spawner.ts): a fork of the server per git call is what made git slow here.
  return runChild({ file: "git", args: [...SAFE_CONFIG, ...location, ...args], cwd, env: gitEnv(env), input }).then(
    ({ code, stdout, stderr }) => {
      const result = { stdout: stdout.toString("utf8"), stderr: stderr.toString("utf8"), code };
      if (result.code !== 0 && !allowFailure) {
        throw new AppError("internal:git", `git ${args[0]} failed (exit ${result.code}): ${result.stderr.trim().slice(0, 2000)}`, {
          details: { args: args.slice(0, 6) },
        });
      }
      return result;
    },
    (error: Error) => {
      throw new AppError("internal:git", `git could not be started: ${error.message}`, { cause: error });
    },
  );
}

/** `git … ` returning trimmed stdout. */
export async function gitOut(cwd: string, args: string[], options?: GitOptions): Promise<string> {
  return (await git(cwd, args, options)).stdout.trim();
}

/** The commit a ref names, or null when it does not exist. */
export async function resolveCommit(repoPath: string, ref: string): Promise<string | null> {
  const r = await git(repoPath, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`], { allowFailure: true });
  return r.code === 0 ? r.stdout.trim() : null;
}

/**
 * The commits several refs (full names) point at, with one process: a ref that does not exist is missing from the map.
 * For branches and remote-tracking refs, which name commits (resolveCommit peels, for a ref that may name a tag).
 */
export async function resolveRefs(repoPath: string, refs: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (!refs.length) return found;
  const wanted = new Set(refs);
  const out = await gitOut(repoPath, ["for-each-ref", "--format=%(objectname) %(refname)", ...refs]);
  // A pattern matches a prefix too (refs/heads/a matches refs/heads/a/b): only the exact refs count.
  for (const line of out.split("\n")) {
    const [sha, name] = line.split(" ");
    if (sha && name && wanted.has(name)) found.set(name, sha);
  }
  return found;
}

/** The repository's shared git directory (absolute), also for a linked worktree. */
export async function commonGitDir(repoPath: string): Promise<string> {
  return gitOut(repoPath, ["rev-parse", "--path-format=absolute", "--git-common-dir"]);
}

export type WorktreeInfo = { path: string; head: string | null; branch: string | null; bare: boolean };

/**
 * git's worktree commands are not safe to run at once on one repository, and parallel runs of one project create and
 * remove their worktrees at the same moment: `git worktree add` reads every entry under .git/worktrees and fails on one
 * another add is still writing ("fatal: failed to read .git/worktrees/<x>/commondir"; 8 of 100 adds started 20 at a
 * time), and `git worktree prune` may take such a half-written entry for a stale one. In this process they run one at a
 * time per repository (oneWorktreeCommandAtATime, keyed by the common git dir); what another process's command causes
 * is retried (retryOnWorktreeRace), also by readers such as listWorktrees.
 */
const worktreeQueues = new Map<string, Promise<unknown>>();

export function oneWorktreeCommandAtATime<T>(commonDir: string, fn: () => Promise<T>): Promise<T> {
  const run = (worktreeQueues.get(commonDir) ?? Promise.resolve()).then(fn, fn);
  const tail = run.catch(() => undefined);
  worktreeQueues.set(commonDir, tail);
  void tail.then(() => {
    if (worktreeQueues.get(commonDir) === tail) worktreeQueues.delete(commonDir);
  });
  return run;
}

/** What git says when another git command on the repository was half-way through: an entry being written, or a lock. */
const WORKTREE_RACE = /failed to read \S*worktrees\/|cannot lock ref|could not lock config file|index\.lock': File exists/;
const WORKTREE_RACE_DELAYS_MS = [50, 150, 400, 1000];

/** Run `fn` again (up to 4 times, 50 ms to 1 s apart) while it fails with WORKTREE_RACE; any other failure at once. */
export async function retryOnWorktreeRace<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      const delay = WORKTREE_RACE_DELAYS_MS[attempt];
      if (delay === undefined || !(error instanceof Error) || !WORKTREE_RACE.test(error.message)) throw error;
      await new Promise((r) => setTimeout(r, delay * (0.5 + Math.random())));
    }
  }
}

export async function listWorktrees(repoPath: string): Promise<WorktreeInfo[]> {
  const text = await retryOnWorktreeRace(() => gitOut(repoPath, ["worktree", "list", "--porcelain"]));
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

/**
 * The git directory of `workTree` as a worktree of `repoPath`, found from the repository's side: the main checkout's
 * own git directory, or the `worktrees/<name>` entry whose `gitdir` file points at `<workTree>/.git`. Nothing inside the
 * work tree is read, so a sandbox that replaced its `.git` cannot redirect host git. Null when it is not a worktree.
 */
export async function worktreeGitDir({ repoPath, workTree }: { repoPath: string; workTree: string }): Promise<string | null> {
  const common = await commonGitDir(repoPath);
  const real = await fs.realpath(workTree).catch(() => path.resolve(workTree));
  const top = await gitOut(repoPath, ["rev-parse", "--show-toplevel"]).catch(() => "");
  if (top && (await fs.realpath(top).catch(() => top)) === real) return common;
  const entries = await fs.readdir(path.join(common, "worktrees")).catch(() => [] as string[]);
  for (const name of entries) {
    const pointer = await fs.readFile(path.join(common, "worktrees", name, "gitdir"), "utf8").catch(() => "");
    if (pointer.trim() === path.join(real, ".git")) return path.join(common, "worktrees", name);
  }
  return null;
}

/** worktreeGitDir() as a location for git()'s `worktree` option, or throws when `workTree` is not a worktree of `repoPath`. */
export async function worktreeLocation({ repoPath, workTree }: { repoPath: string; workTree: string }): Promise<WorktreeLocation> {
  const gitDir = await worktreeGitDir({ repoPath, workTree });
  if (!gitDir) throw new AppError("internal:git", `${workTree} is not a worktree of the project's repository.`);
  return { gitDir, workTree: await fs.realpath(workTree).catch(() => path.resolve(workTree)) };
}

/**
 * Stage everything in a worktree as plain files (all of it, or only its intent with `intentToAdd`), except `pathspecs`
 * excluded. A directory holding its own `.git` would be staged as a gitlink into a repository the sandbox made up: any
 * gitlink that is not already in HEAD is taken out of the index again, so such metadata never reaches a commit.
 */
export async function stageWorktree(
  worktree: WorktreeLocation,
  pathspecs: string[],
  { intentToAdd = false, env }: { intentToAdd?: boolean; env?: Record<string, string> } = {},
): Promise<void> {
  const options = { worktree, env };
  // --ignore-errors: a path git cannot index (a nested repository without a commit) is left out instead of failing the
  // whole checkpoint; everything else is staged.
  const added = await git(worktree.workTree, ["add", "--all", "--ignore-errors", ...(intentToAdd ? ["--intent-to-add"] : []), "--", ".", ...pathspecs], {
    ...options,
    allowFailure: true,
  });
  if (added.code !== 0 && !/does not have a commit checked out|adding files failed/.test(added.stderr)) {
    throw new AppError("internal:git", `git add failed (exit ${added.code}): ${added.stderr.trim().slice(0, 2000)}`);
  }
  const gitlinks = (out: string) =>
    out
      .split("\0")
      .filter((line) => line.startsWith("160000 "))
      .map((line) => line.slice(line.indexOf("\t") + 1));
  const staged = gitlinks((await git(worktree.workTree, ["ls-files", "--stage", "-z"], options)).stdout);
  if (staged.length === 0) return;
  const head = await git(worktree.workTree, ["ls-tree", "-r", "-z", "HEAD"], { ...options, allowFailure: true });
  const known = new Set(gitlinks(head.stdout));
  const planted = staged.filter((p) => !known.has(p));
  if (planted.length === 0) return;
  await git(worktree.workTree, ["update-index", "--force-remove", "-z", "--stdin"], { ...options, input: `${planted.join("\0")}\0` });
}
