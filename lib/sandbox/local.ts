import { constants as FS, existsSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { baseChildEnv, getEnv, secretValues, SECRET_ENV_NAMES } from "@/lib/env";
import { AppError } from "@/lib/errors";
import {
  commonGitDir,
  git,
  gitOut,
  resolveCommit,
  oneWorktreeCommandAtATime,
  retryOnWorktreeRace,
  stageWorktree,
  worktreeLocation,
  type WorktreeLocation,
} from "@/lib/git/run";
import { boundedDiff, withNotes, type DiffOptions } from "@/lib/git/diff";
import { excludePathspecs } from "@/lib/git/pathspecs";
import { bwrapArgs, bwrapStatus } from "./bwrap";
import { createCommandCgroup, joinCgroupArgv, reopenCommandCgroup, rlimitArgs, sandboxLimits, type CgroupRecord, type CommandCgroup } from "./limits";
import { resolveInside, toRelative } from "./paths";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { startDetachedChild } from "@/lib/git/spawner";
import { killGroup, readCapped, runProcess, DEFAULT_TIMEOUT_MS } from "./process";
import type { DetachedStatus, ExecOptions, ExecResult, FileEntry, Sandbox, StdioLine } from "./types";

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
  /**
   * A fresh worktree whose `branch` is (re)cut at `ref` by the same git process that adds the worktree
   * (`worktree add -B`): a parallel task's start, one process for its branch and its checkout.
   */
  recut?: boolean;
  /** Paths never committed nor shown in diffs (from .autonomous/config.json). */
  excludePaths?: string[];
  /** Outbound network for commands (from .autonomous/config.json sandbox.allowInternet; default off). */
  allowInternet?: boolean;
};

const MAX_LIST_ENTRIES = 10_000;
const ALWAYS_EXCLUDED = [".autonomous"];

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
    /** The repository's shared git directory: bound read-only into the sandbox, so git inside can read history. */
    private readonly commonDir: string,
    /** Where host git finds this worktree (never through the worktree's own, sandbox-writable `.git`). */
    readonly location: WorktreeLocation,
    readonly excludePaths: string[],
    isolated: boolean,
    readonly allowInternet = false,
  ) {
    this.isolated = isolated;
  }

  static async create(options: LocalSandboxOptions): Promise<LocalSandbox> {
    const { runId, repoPath, ref, branch, isolation = "auto", excludePaths = [], allowInternet = false } = options;
    const status = bwrapStatus();
    if (isolation === "bwrap" && !status.available) {
      throw new AppError("unavailable:sandbox", `Isolation was required but ${status.reason}.`);
    }
    const useBwrap = isolation !== "none" && status.available;
    const dir = worktreeDir(runId);
    // Independent reads side by side: each git call is a process.
    const [startSha, givenBase, commonDir] = await Promise.all([
      resolveCommit(repoPath, ref),
      options.diffBase ? resolveCommit(repoPath, options.diffBase) : null,
      commonGitDir(repoPath),
      fs.mkdir(path.dirname(dir), { recursive: true }),
    ]);
    if (!startSha) throw new AppError("not_found:sandbox", `Ref "${ref}" does not exist in ${repoPath}.`);
    const diffBase = options.diffBase ? givenBase : startSha;
    if (!diffBase) throw new AppError("not_found:sandbox", `Ref "${options.diffBase}" does not exist in ${repoPath}.`);

    const reused = options.reuse && branch ? await worktreeOnBranch(repoPath, commonDir, dir, branch) : null;
    if (reused) {
      // Durable steps of one run share the worktree: uncommitted work survives between steps and a process crash.
      const home = `${dir}.home`;
      await fs.mkdir(home, { recursive: true });
      return new LocalSandbox(`local_${runId}`, runId, repoPath, reused.workTree, home, diffBase, branch!, commonDir, reused, excludePaths, useBwrap, allowInternet);
    }
    await oneWorktreeCommandAtATime(commonDir, () =>
      retryOnWorktreeRace(async () => {
        // Asked again on a retry: an add that failed late may have made the branch.
        const [, exists] = await Promise.all([
          removeWorktreeNow(repoPath, dir, commonDir),
          branch && !options.recut ? resolveCommit(repoPath, `refs/heads/${branch}`) : null,
        ]);
        if (branch && options.recut) {
          await git(repoPath, ["worktree", "add", "--force", "-B", branch, dir, startSha]);
        } else if (branch) {
          await git(repoPath, exists ? ["worktree", "add", "--force", dir, branch] : ["worktree", "add", "-b", branch, dir, startSha]);
        } else {
          await git(repoPath, ["worktree", "add", "--detach", dir, startSha]);
        }
      }),
    );
    const home = `${dir}.home`;
    const [real] = await Promise.all([fs.realpath(dir), fs.mkdir(home, { recursive: true })]);
    const location = await locationOf(repoPath, commonDir, dir, real);
    return new LocalSandbox(`local_${runId}`, runId, repoPath, real, home, diffBase, branch ?? null, commonDir, location, excludePaths, useBwrap, allowInternet);
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
    const line = this.limitedLine(command, args, cwd);
    try {
      const result = await runProcess({ file: line.file, args: line.args, cwd, ...common });
      const note = line.cgroup?.limitNote();
      return note ? { ...result, stderr: result.stderr + note } : result;
    } finally {
      await line.cgroup?.remove();
    }
  };

  stdioLine = async (command: string, args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<StdioLine> => {
    if (typeof command !== "string" || command === "" || !Array.isArray(args)) {
      throw new AppError("bad_request:sandbox", "exec needs a program name and an argument array.");
    }
    const cwd = await resolveInside(this.workspacePath, options.cwd ?? ".");
    const env = baseChildEnv({ ...sanitizeEnv(options.env), HOME: this.isolated ? "/tmp" : this.home });
    const line = this.limitedLine(command, args, cwd);
    return { file: line.file, args: line.args, cwd, env, release: async () => void (await line.cgroup?.remove()) };
  };

  /**
   * The program line of one command, inline (exec) or detached (startDetached) alike, with every limit: where isolated,
   * bubblewrap with the per-process rlimits inside it; otherwise the rlimits around the plain command (without
   * RLIMIT_NPROC, which outside a user namespace would count all of the server user's processes); in both, a fresh
   * per-command cgroup (processes, memory) joined before the program starts, when this machine gives one. The caller
   * removes the cgroup once the command has ended.
   */
  private limitedLine(command: string, args: string[], cwd: string): { file: string; args: string[]; cgroup: CommandCgroup | null } {
    const status = bwrapStatus();
    const limits = sandboxLimits();
    let file = command;
    let argv = args;
    if (this.isolated) {
      file = status.path!;
      argv = bwrapArgs({
        writable: this.workspacePath,
        readOnly: [this.commonDir],
        cwd,
        command,
        args,
        prefix: status.prlimit ? [status.prlimit, ...rlimitArgs(limits)] : [],
        network: this.allowInternet,
      });
    } else if (status.prlimit) {
      file = status.prlimit;
      argv = [...rlimitArgs(limits, { nproc: false }), command, ...args];
    }
    const cgroup = createCommandCgroup(limits);
    if (!cgroup) return { file, args: argv, cgroup: null };
    const join = joinCgroupArgv(cgroup.procsFiles);
    return { file: join.file, args: [...join.args, file, ...argv], cgroup };
  }

  /**
   * A detached command: the same program line exec runs, with the same limits (bubblewrap, rlimits and its own
   * per-command cgroup, kept in its meta.json so that any later look — from any process — notes a limit it hit and
   * removes the cgroup with whatever is left in it), under a small /bin/sh outside the cgroup that writes its exit code
   * when it ends. Its files live in the sandbox's home (`<worktree>.home/commands/<id>`), outside the worktree, and go
   * with destroy().
   */
  startDetached = async (command: string, args: string[], options: Omit<ExecOptions, "signal" | "stdin"> = {}): Promise<{ id: string }> => {
    if (typeof command !== "string" || command === "" || !Array.isArray(args)) {
      throw new AppError("bad_request:sandbox", "exec needs a program name and an argument array.");
    }
    const cwd = await resolveInside(this.workspacePath, options.cwd ?? ".");
    const env = baseChildEnv({ ...sanitizeEnv(options.env), HOME: this.isolated ? "/tmp" : this.home });
    const id = randomUUID();
    const dir = this.detachedDir(id);
    await fs.mkdir(dir, { recursive: true });
    const line = this.limitedLine(command, args, cwd);
    // The exit code is written to a temporary name and renamed: a reader sees it whole or not at all.
    const script = 'd="$1"; shift; "$@" >"$d/stdout" 2>"$d/stderr" </dev/null; echo $? >"$d/exit.tmp"; mv "$d/exit.tmp" "$d/exit"';
    const argv = ["-c", script, "sh", dir, line.file, ...line.args];
    // Started by the spawn helper (lib/git/spawner.ts) where there is one: a fork of the server is slow.
    const pid = await (startDetachedChild({ file: "/bin/sh", args: argv, cwd, env })?.catch(() => 0) ??
      new Promise<number>((resolve) => {
        const child = spawn("/bin/sh", argv, { cwd, env: env as NodeJS.ProcessEnv, detached: true, stdio: "ignore" });
        child.on("error", () => null);
        child.unref();
        resolve(child.pid ?? 0);
      }));
    const meta: DetachedMeta = {
      pid,
      startedAt: Date.now(),
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      maxOutputBytes: options.maxOutputBytes,
      cgroup: line.cgroup?.record,
    };
    await fs.writeFile(path.join(dir, "meta.json"), JSON.stringify(meta));
    return { id };
  };

  detachedStatus = async (id: string): Promise<DetachedStatus> => {
    const dir = this.detachedDir(id);
    const meta = await readDetachedMeta(dir);
    if (!meta) return lostCommand();
    const exitFile = path.join(dir, "exit");
    let exit = await fs.readFile(exitFile, "utf8").catch(() => null);
    if (exit === null) {
      const alive = processAlive(meta.pid);
      if (alive && Date.now() - meta.startedAt <= meta.timeoutMs) return { state: "running" };
      // The command may have ended between the read above and the look at its process (its shell writes the exit
      // code, then exits): read again before calling it lost. Under load that window is real, and a check that
      // passed was once reported as "ended without an exit code".
      exit = await fs.readFile(exitFile, "utf8").catch(() => null);
      if (exit === null) {
        killGroup(meta.pid);
        // Recorded, so a later look (a step re-run after a crash) reports the same end.
        exit = alive ? "timeout" : "lost";
        await fs.writeFile(exitFile, exit);
      }
    }
    // Like exec: whatever the command left running in its group, or in its cgroup, goes with it.
    killGroup(meta.pid);
    const limitNote = await settleCgroup(dir, meta);
    const ended = (await fs.stat(exitFile).catch(() => null))?.mtimeMs ?? Date.now();
    const out = await readCapped(path.join(dir, "stdout"), meta.maxOutputBytes);
    const err = await readCapped(path.join(dir, "stderr"), meta.maxOutputBytes);
    const code = /^\d+$/.test(exit.trim()) ? Number(exit.trim()) : null;
    const note = exit === "lost" ? "\n[the command ended without an exit code (its host restarted)]\n" : exit === "killed" ? "\n[killed]\n" : "";
    return {
      state: "exited",
      result: {
        exitCode: code,
        stdout: out.text,
        stderr: err.text + limitNote + note,
        timedOut: exit === "timeout",
        truncated: out.truncated || err.truncated,
        durationMs: Math.max(0, Math.round(ended - meta.startedAt)),
      },
    };
  };

  killDetached = async (id: string): Promise<void> => {
    const dir = this.detachedDir(id);
    const meta = await readDetachedMeta(dir);
    if (!meta) return;
    killGroup(meta.pid);
    if (!(await fs.stat(path.join(dir, "exit")).catch(() => null))) await fs.writeFile(path.join(dir, "exit"), "killed");
    await settleCgroup(dir, meta);
  };

  private detachedDir(id: string): string {
    if (!/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new AppError("bad_request:sandbox", `Invalid detached command id: ${id}`);
    return path.join(this.home, "commands", id);
  }

  diff = async (options: DiffOptions = {}): Promise<string> => {
    // Intent-to-add makes new files show up in the diff without staging their content.
    await stageWorktree(this.location, this.pathspecExcludes(), { intentToAdd: true });
    const diff = await boundedDiff({
      cwd: this.workspacePath,
      args: [this.baseSha, "--", ".", ...this.pathspecExcludes()],
      worktree: this.location,
      sizeOf: async (p) => (await fs.lstat(path.join(this.workspacePath, p)).catch(() => null))?.size ?? null,
      ...options,
    });
    return options.onLine ? "" : withNotes(diff);
  };

  /** Pathspecs that keep Gatehouse's own records and the project's excluded paths out of diffs and checkpoints. */
  pathspecExcludes(): string[] {
    return excludePathspecs([...ALWAYS_EXCLUDED, ...this.excludePaths]);
  }

  /** Current HEAD commit of the worktree. */
  head(): Promise<string> {
    return gitOut(this.workspacePath, ["rev-parse", "HEAD"], { worktree: this.location });
  }

  /**
   * This worktree and home handed to the next task of a parallel lane: nothing of the task before stays. Its detached
   * commands are killed and its home emptied; host git (the hardened config, on the worktree's real git directory)
   * checks out `branch`, (re)cut at `startSha`, in one process that also puts back every tracked file as that commit
   * has it, then removes every untracked and ignored file (build outputs, nested repositories: `clean -ffdx`); the
   * worktree's `.git` entry, which the sandbox could rewrite, is written again as `git worktree add` writes it. The
   * result is what a fresh worktree at `startSha` would hold, without the worktree's removal, prune and re-add.
   */
  repoint = async ({ branch, startSha }: { branch: string; startSha: string }): Promise<LocalSandbox> => {
    await killDetachedIn(this.home);
    await fs.rm(this.home, { recursive: true, force: true });
    await fs.mkdir(this.home, { recursive: true });
    const options = { worktree: this.location };
    await git(this.workspacePath, ["checkout", "--quiet", "--force", "-B", branch, startSha], options);
    await git(this.workspacePath, ["clean", "-ffdxq"], options);
    const dotGit = path.join(this.workspacePath, ".git");
    await fs.rm(dotGit, { recursive: true, force: true });
    await fs.writeFile(dotGit, `gitdir: ${this.location.gitDir}\n`);
    return new LocalSandbox(this.id, this.runId, this.repoPath, this.workspacePath, this.home, startSha, branch, this.commonDir, this.location, this.excludePaths, this.isolated, this.allowInternet);
  };

  destroy = async (): Promise<void> => {
    await killDetachedIn(this.home);
    await removeWorktree(this.repoPath, this.workspacePath, this.commonDir);
    await fs.rm(this.home, { recursive: true, force: true });
  };
}

/**
 * A detached command this sandbox has no trace of (it was recreated, e.g. after a restart of an E2B sandbox): ended
 * with no exit code, and said so, so the model can run it again rather than the run failing.
 */
export function lostCommand(): DetachedStatus {
  const stderr = "[the command's result is gone: its sandbox was recreated meanwhile; run it again if the result is needed]\n";
  return { state: "exited", result: { exitCode: null, stdout: "", stderr, timedOut: false, truncated: false, durationMs: 0 } };
}

type DetachedMeta = { pid: number; startedAt: number; timeoutMs: number; maxOutputBytes?: number; cgroup?: CgroupRecord };

async function readDetachedMeta(dir: string): Promise<DetachedMeta | null> {
  const raw = await fs.readFile(path.join(dir, "meta.json"), "utf8").catch(() => null);
  return raw ? (JSON.parse(raw) as DetachedMeta) : null;
}

/**
 * Once a detached command has ended (or been killed): the note of a limit it hit, read from its cgroup and kept in its
 * directory (so every later look, from any process, reports the same), and its cgroup removed with anything left in it.
 * "" when it had no cgroup or hit no limit.
 */
async function settleCgroup(dir: string, meta: DetachedMeta): Promise<string> {
  if (!meta.cgroup) return "";
  const file = path.join(dir, "limits");
  const kept = await fs.readFile(file, "utf8").catch(() => null);
  if (kept !== null) return kept;
  const cgroup = reopenCommandCgroup(meta.cgroup);
  const note = cgroup?.limitNote() ?? "";
  // Written before the cgroup goes, and only once: a look racing this one and reading a cgroup already removed takes
  // this note rather than its own empty one.
  const written = await fs.writeFile(file, note, { flag: "wx" }).then(
    () => true,
    () => false,
  );
  await cgroup?.remove();
  return written ? note : await fs.readFile(file, "utf8").catch(() => note);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kill every detached command still running from a sandbox home (the sandbox goes: a cancel, a pause, the end). */
async function killDetachedIn(home: string) {
  const ids = await fs.readdir(path.join(home, "commands")).catch(() => [] as string[]);
  for (const id of ids) {
    const meta = await readDetachedMeta(path.join(home, "commands", id));
    if (meta && !(await fs.stat(path.join(home, "commands", id, "exit")).catch(() => null))) killGroup(meta.pid);
    // Its cgroup too, whether or not its end was looked at (a look removes it; a command nobody collected has it still).
    if (meta?.cgroup) await reopenCommandCgroup(meta.cgroup)?.remove();
  }
}

/** Whether a run's worktree (or its sandbox home) is on disk: a sandbox attached now would reuse it, not check out anew. */
export function runWorktreeOnDisk(runId: string): boolean {
  // Two stats, asked synchronously: through the thread pool they waited behind the database's work (up to 50 ms).
  const dir = worktreeDir(runId);
  return existsSync(dir) || existsSync(`${dir}.home`);
}

function worktreeDir(runId: string): string {
  return path.join(getEnv().dataDir, "workspaces", runId.replace(/[^A-Za-z0-9_-]/g, "_"));
}

/**
 * Where host git finds the worktree at `dir` (its realpath `real`), read from the repository's side: the entry
 * `git worktree add` names after it (`<common dir>/worktrees/<name>`) when its `gitdir` points back at it, else the
 * full search (worktreeLocation). Nothing inside the work tree is read.
 */
async function locationOf(repoPath: string, commonDir: string, dir: string, real: string): Promise<WorktreeLocation> {
  const named = path.join(commonDir, "worktrees", path.basename(dir));
  const pointer = await fs.readFile(path.join(named, "gitdir"), "utf8").catch(() => "");
  if (pointer.trim() === path.join(real, ".git")) return { gitDir: named, workTree: real };
  return worktreeLocation({ repoPath, workTree: real });
}

/** `dir`'s location when it is a live worktree of the repository with `branch` checked out (asked of the repository, not of `dir`), else null. */
async function worktreeOnBranch(repoPath: string, commonDir: string, dir: string, branch: string): Promise<WorktreeLocation | null> {
  const exists = await fs.stat(dir).catch(() => null);
  if (!exists?.isDirectory()) return null;
  const workTree = await fs.realpath(dir);
  const location = await locationOf(repoPath, commonDir, dir, workTree).catch(() => null);
  if (!location) return null;
  const head = await git(workTree, ["symbolic-ref", "--quiet", "HEAD"], { allowFailure: true, worktree: location });
  return head.code === 0 && head.stdout.trim() === `refs/heads/${branch}` ? location : null;
}

/**
 * Remove a run's worktree (and its sandbox home) if one is left on disk, e.g. by a run that failed mid-step. True when
 * there was one.
 */
export async function removeRunWorktree({ runId, repoPath }: { runId: string; repoPath: string }): Promise<boolean> {
  const dir = worktreeDir(runId);
  const existed = !!(await fs.stat(dir).catch(() => null)) || !!(await fs.stat(`${dir}.home`).catch(() => null));
  if (!existed) return false;
  await killDetachedIn(`${dir}.home`);
  await removeWorktree(repoPath, dir);
  await fs.rm(`${dir}.home`, { recursive: true, force: true });
  return true;
}

/**
 * Delete the worktree's files first, then let git forget it: git never looks inside a directory that a sandbox wrote
 * (`git worktree remove` would read the worktree's own `.git` and index). The files go outside the queue; the prune
 * waits its turn among the repository's worktree commands.
 */
async function removeWorktree(repoPath: string, dir: string, commonDir?: string) {
  await deleteWorktreeFiles(dir);
  const key = commonDir ?? (await commonGitDir(repoPath).catch(() => path.resolve(repoPath)));
  await pruneWorktrees(repoPath, key);
}

/**
 * A prune that has not started yet, per repository: a removal that asks for one while another waits its turn joins it
 * (its files are gone already, and that prune starts later), so sandboxes released side by side (a round of parallel
 * tasks) prune once or twice rather than once each, one after another.
 */
const waitingPrunes = new Map<string, Promise<unknown>>();

function pruneWorktrees(repoPath: string, key: string): Promise<unknown> {
  const waiting = waitingPrunes.get(key);
  if (waiting) return waiting;
  const prune = oneWorktreeCommandAtATime(key, () => {
    // Started: a removal from now on needs a prune of its own.
    waitingPrunes.delete(key);
    return git(repoPath, ["worktree", "prune"], { allowFailure: true });
  });
  waitingPrunes.set(key, prune);
  return prune;
}

/**
 * removeWorktree for a caller already in the repository's turn (oneWorktreeCommandAtATime), before `git worktree add`
 * makes the worktree at `dir` again: git is asked to prune only when something of an earlier one is left (its files, or
 * an entry under `<common dir>/worktrees/` named after it), not for every new worktree.
 */
async function removeWorktreeNow(repoPath: string, dir: string, commonDir: string) {
  const existed = await deleteWorktreeFiles(dir);
  const name = path.basename(dir);
  const entries = await fs.readdir(path.join(commonDir, "worktrees")).catch(() => [] as string[]);
  if (existed || entries.some((entry) => entry.startsWith(name))) await git(repoPath, ["worktree", "prune"], { allowFailure: true });
}

/** Delete a worktree's files; true when there were any. */
async function deleteWorktreeFiles(dir: string): Promise<boolean> {
  // Renamed away first (atomically, out of workspaces/), so nothing racing with the removal sees a half-deleted worktree.
  const trash = path.join(getEnv().dataDir, "trash");
  await fs.mkdir(trash, { recursive: true });
  const doomed = path.join(trash, `${path.basename(dir)}-${process.pid}-${Date.now()}`);
  const moved = await fs.rename(dir, doomed).then(
    () => true,
    () => false,
  );
  const existed = moved || !!(await fs.lstat(dir).catch(() => null));
  await fs.rm(moved ? doomed : dir, { recursive: true, force: true });
  return existed;
}

function fileError(requested: string, error: unknown): AppError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return new AppError("not_found:sandbox", `No such file: ${requested}`, { cause: error });
  if (code === "EISDIR") return new AppError("bad_request:sandbox", `${requested} is a directory.`, { cause: error });
  if (code === "ENOTDIR") return new AppError("bad_request:sandbox", `${requested} is not a directory.`, { cause: error });
  if (code === "ELOOP") return new AppError("bad_request:sandbox", `${requested} is a symbolic link.`, { cause: error });
  return new AppError("internal:sandbox", `Cannot access ${requested}: ${code ?? String(error)}`, { cause: error });
}
