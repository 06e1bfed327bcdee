import { constants as FS } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { baseChildEnv, getEnv, secretValues, SECRET_ENV_NAMES } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { commonGitDir, git, gitOut, resolveCommit } from "@/lib/git/run";
import { bwrapArgs, bwrapStatus } from "./bwrap";
import { resolveInside, toRelative } from "./paths";
import { runProcess } from "./process";
import type { ExecOptions, ExecResult, FileEntry, Sandbox } from "./types";

export type Isolation = "auto" | "bwrap" | "none";

export type LocalSandboxOptions = {
  runId: string;
  /** The repository the worktree is added to. */
  repoPath: string;
  /** What to check out (branch, tag or sha); with `branch`, where a new branch starts. */
  ref: string;
  /** Check out this branch (created at `ref` when missing) instead of a detached HEAD. */
  branch?: string;
  /** What diff() compares against (default: the commit `ref` named at creation). */
  diffBase?: string;
  /** auto: bubblewrap when it works; bwrap: refuse to start without it; none: plain child processes. */
  isolation?: Isolation;
  /** Reuse the run's existing worktree (with its uncommitted work) when it is on `branch`, instead of recreating it. */
  reuse?: boolean;
  /** Paths never committed nor shown in diffs (from .autonomous/config.json). */
  excludePaths?: string[];
};

const MAX_LIST_ENTRIES = 10_000;
const ALWAYS_EXCLUDED = [".autonomous"];

export function excludePathspecs(excludePaths: string[] = []): string[] {
  // Like .gitignore: a pattern without a slash matches at any depth ("*.log", "secrets").
  return excludePaths
    .map((p) => p.trim().replace(/^\/+/, ""))
    .filter((p) => p !== "")
    .flatMap((p) => (p.includes("/") ? [`:(exclude,glob)${p}`] : [`:(exclude,glob)${p}`, `:(exclude,glob)**/${p}`]));
}

/** Drop extra variables that name or carry an app secret: the sandbox never sees them. */
export function sanitizeEnv(extra: Record<string, string> | undefined): Record<string, string> {
  const secrets = new Set(secretValues());
  const names = new Set<string>(SECRET_ENV_NAMES);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(extra ?? {})) {
    if (names.has(k) || [...secrets].some((s) => v.includes(s))) continue;
    out[k] = v;
  }
  return out;
}

export class LocalSandbox implements Sandbox {
  readonly kind = "local" as const;
  readonly isolated: boolean;

  private constructor(
    readonly id: string,
    readonly runId: string,
    readonly repoPath: string,
    /** Absolute realpath of the worktree. */
    readonly workspacePath: string,
    private readonly home: string,
    readonly baseSha: string,
    readonly branch: string | null,
    private readonly gitDir: string,
    readonly excludePaths: string[],
    isolated: boolean,
  ) {
    this.isolated = isolated;
  }

  static async create(options: LocalSandboxOptions): Promise<LocalSandbox> {
    const { runId, repoPath, ref, branch, isolation = "auto", excludePaths = [] } = options;
    const status = bwrapStatus();
    if (isolation === "bwrap" && !status.available) {
      throw new AppError("unavailable:sandbox", `Isolation was required but ${status.reason}.`);
    }
    const useBwrap = isolation !== "none" && status.available;
    const startSha = await resolveCommit(repoPath, ref);
    if (!startSha) throw new AppError("not_found:sandbox", `Ref "${ref}" does not exist in ${repoPath}.`);
    const diffBase = options.diffBase ? await resolveCommit(repoPath, options.diffBase) : startSha;
    if (!diffBase) throw new AppError("not_found:sandbox", `Ref "${options.diffBase}" does not exist in ${repoPath}.`);

    const dir = worktreeDir(runId);
    await fs.mkdir(path.dirname(dir), { recursive: true });
    if (options.reuse && branch && (await worktreeOnBranch(dir, branch))) {
      // Durable steps of one run share the worktree: uncommitted work survives between steps and a process crash.
      const real = await fs.realpath(dir);
      const home = `${dir}.home`;
      await fs.mkdir(home, { recursive: true });
      return new LocalSandbox(`local_${runId}`, runId, repoPath, real, home, diffBase, branch, await commonGitDir(real), excludePaths, useBwrap);
    }
    await removeWorktree(repoPath, dir);
    if (branch) {
      const exists = await resolveCommit(repoPath, `refs/heads/${branch}`);
      await git(repoPath, exists ? ["worktree", "add", "--force", dir, branch] : ["worktree", "add", "-b", branch, dir, startSha]);
    } else {
      await git(repoPath, ["worktree", "add", "--detach", dir, startSha]);
    }
    const home = `${dir}.home`;
    await fs.mkdir(home, { recursive: true });
    const real = await fs.realpath(dir);
    const gitDir = await commonGitDir(real);
    return new LocalSandbox(`local_${runId}`, runId, repoPath, real, home, diffBase, branch ?? null, gitDir, excludePaths, useBwrap);
  }

  readFile = async (requested: string): Promise<string> => {
    const abs = await resolveInside(this.workspacePath, requested);
    const real = await fs.realpath(abs).catch(() => abs);
    try {
      return await fs.readFile(real, "utf8");
    } catch (error) {
      throw fileError(requested, error);
    }
  };

  writeFile = async (requested: string, content: string): Promise<void> => {
    const abs = await resolveInside(this.workspacePath, requested);
    if (abs === this.workspacePath) throw new AppError("bad_request:sandbox", "A file path is required.");
    await fs.mkdir(path.dirname(abs), { recursive: true });
    // Re-check after mkdir, then refuse to follow a symlink at the last component (it may have appeared meanwhile).
    const checked = await resolveInside(this.workspacePath, requested);
    const real = await fs.realpath(checked).catch(() => checked);
    let handle: fs.FileHandle | undefined;
    try {
      handle = await fs.open(real, FS.O_WRONLY | FS.O_CREAT | FS.O_TRUNC | FS.O_NOFOLLOW, 0o644);
      await handle.writeFile(content, "utf8");
    } catch (error) {
      throw fileError(requested, error);
    } finally {
      await handle?.close();
    }
  };

  listFiles = async (requested = ".", options: { recursive?: boolean } = {}): Promise<FileEntry[]> => {
    const start = await resolveInside(this.workspacePath, requested);
    const out: FileEntry[] = [];
    const walk = async (dir: string) => {
      let entries;
      try {
        entries = await fs.readdir(dir, { withFileTypes: true });
      } catch (error) {
        throw fileError(requested, error);
      }
      entries.sort((a, b) => a.name.localeCompare(b.name));
      for (const entry of entries) {
        if (out.length >= MAX_LIST_ENTRIES) return;
        if (dir === this.workspacePath && entry.name === ".git") continue;
        const abs = path.join(dir, entry.name);
        const rel = toRelative(this.workspacePath, abs);
        if (entry.isDirectory()) {
          out.push({ path: rel, type: "dir" });
          if (options.recursive && entry.name !== "node_modules") await walk(abs);
        } else {
          const stat = await fs.lstat(abs).catch(() => null);
          out.push({ path: rel, type: "file", size: stat?.size });
        }
      }
    };
    await walk(start);
    return out;
  };

  exec = async (command: string, args: string[], options: ExecOptions = {}): Promise<ExecResult> => {
    if (typeof command !== "string" || command === "" || !Array.isArray(args)) {
      throw new AppError("bad_request:sandbox", "exec needs a program name and an argument array.");
    }
    const cwd = await resolveInside(this.workspacePath, options.cwd ?? ".");
    const env = baseChildEnv({ ...sanitizeEnv(options.env), HOME: this.isolated ? "/tmp" : this.home });
    const common = { env, timeoutMs: options.timeoutMs, maxOutputBytes: options.maxOutputBytes, stdin: options.stdin, signal: options.signal };
    if (!this.isolated) return runProcess({ file: command, args, cwd, ...common });
    const bwrap = bwrapStatus().path!;
    return runProcess({
      file: bwrap,
      args: bwrapArgs({ writable: this.workspacePath, readOnly: [this.gitDir], cwd, command, args }),
      cwd,
      ...common,
    });
  };

  diff = async (): Promise<string> => {
    // Intent-to-add makes new files show up in the diff without staging their content.
    await git(this.workspacePath, ["add", "--all", "--intent-to-add", "--", ".", ...this.pathspecExcludes()]);
    return (await git(this.workspacePath, ["diff", this.baseSha, "--", ".", ...this.pathspecExcludes()])).stdout;
  };

  /** Pathspecs that keep Gatehouse's own records and the project's excluded paths out of diffs and checkpoints. */
  pathspecExcludes(): string[] {
    return excludePathspecs([...ALWAYS_EXCLUDED, ...this.excludePaths]);
  }

  /** Current HEAD commit of the worktree. */
  head(): Promise<string> {
    return gitOut(this.workspacePath, ["rev-parse", "HEAD"]);
  }

  destroy = async (): Promise<void> => {
    await removeWorktree(this.repoPath, this.workspacePath);
    await fs.rm(this.home, { recursive: true, force: true });
  };
}

function worktreeDir(runId: string): string {
  return path.join(getEnv().dataDir, "workspaces", runId.replace(/[^A-Za-z0-9_-]/g, "_"));
}

/** Whether `dir` is a live worktree with `branch` checked out. */
async function worktreeOnBranch(dir: string, branch: string): Promise<boolean> {
  const stat = await fs.stat(path.join(dir, ".git")).catch(() => null);
  if (!stat) return false;
  const head = await git(dir, ["symbolic-ref", "--quiet", "HEAD"], { allowFailure: true });
  return head.code === 0 && head.stdout.trim() === `refs/heads/${branch}`;
}

async function removeWorktree(repoPath: string, dir: string) {
  await git(repoPath, ["worktree", "remove", "--force", "--force", dir], { allowFailure: true });
  await fs.rm(dir, { recursive: true, force: true });
  await git(repoPath, ["worktree", "prune"], { allowFailure: true });
}

function fileError(requested: string, error: unknown): AppError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return new AppError("not_found:sandbox", `No such file: ${requested}`, { cause: error });
  if (code === "EISDIR") return new AppError("bad_request:sandbox", `${requested} is a directory.`, { cause: error });
  if (code === "ENOTDIR") return new AppError("bad_request:sandbox", `${requested} is not a directory.`, { cause: error });
  if (code === "ELOOP") return new AppError("bad_request:sandbox", `${requested} is a symbolic link.`, { cause: error });
  return new AppError("internal:sandbox", `Cannot access ${requested}: ${code ?? String(error)}`, { cause: error });
}
