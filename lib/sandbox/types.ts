import type { DiffOptions } from "@/lib/git/diff";

/**
 * Where agent code runs. One interface, two implementations (local worktree + bubblewrap; E2B).
 * Paths are always relative to the workspace root; implementations refuse anything that resolves outside it.
 */

export type ExecOptions = {
  /** Working directory relative to the workspace root (default: the root). */
  cwd?: string;
  /** Kill the whole process tree after this many ms (default 120 000). */
  timeoutMs?: number;
  /** Extra environment for the command (never secrets). */
  env?: Record<string, string>;
  /** Bytes of stdout/stderr kept, each (default 1 MiB); the cut is marked in the output. */
  maxOutputBytes?: number;
  stdin?: string;
  /** Kills the whole process tree when aborted (a cancelled run stops its command at once). */
  signal?: AbortSignal;
};

export type ExecResult = {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
};

/** Where a detached command is (Sandbox.detachedStatus): still running, or ended with its result. */
export type DetachedStatus = { state: "running" } | { state: "exited"; result: ExecResult };

export type StdioLine = { file: string; args: string[]; cwd: string; env: Record<string, string>; release: () => Promise<void> };

/**
 * A long-lived process in a remote sandbox whose stdin and stdout are a byte stream carried by the sandbox's API (a
 * stdio MCP server in E2B): what it writes arrives through `onStdout`, `write` sends to its stdin, `kill` ends it.
 */
export type StdioProcess = { write(data: string): Promise<void>; kill(): Promise<void> };

export type StdioProcessOptions = {
  /** Working directory relative to the workspace root. */
  cwd?: string;
  env?: Record<string, string>;
  /** The process is killed after this long, whatever happens (E2B's command timeout). */
  timeoutMs: number;
  onStdout(data: string): void;
  onStderr?(data: string): void;
  /** Once, when the process has ended (by itself, killed, or timed out). */
  onExit(result: { exitCode: number | null; error?: string }): void;
};

export type FileEntry = { path: string; type: "file" | "dir"; size?: number };

export interface Sandbox {
  readonly id: string;
  readonly kind: "local" | "e2b";
  /** Whether commands are isolated (bubblewrap / E2B) or plain child processes. */
  readonly isolated: boolean;
  readFile(path: string): Promise<string>;
  writeFile(path: string, content: string): Promise<void>;
  listFiles(path?: string, options?: { recursive?: boolean }): Promise<FileEntry[]>;
  /** Run a program with an argument array — never a shell string. */
  exec(command: string, args: string[], options?: ExecOptions): Promise<ExecResult>;
  /**
   * Start a command that outlives this call (and this process): it runs as exec would, its output goes to files the
   * sandbox owns outside the workspace (never committed), and detachedStatus collects it later, from any process. A
   * durable step uses it for a command that would outlive the host's step duration. Absent: commands run inline only.
   */
  startDetached?(command: string, args: string[], options?: Omit<ExecOptions, "signal" | "stdin">): Promise<{ id: string }>;
  /** The detached command's state; past its timeout it is killed and reported timed out. Idempotent once exited. */
  detachedStatus?(id: string): Promise<DetachedStatus>;
  /** Kill a detached command (its whole process group); a no-op once it exited. */
  killDetached?(id: string): Promise<void>;
  /**
   * The program line of a long-lived process the caller spawns with its stdin/stdout as pipes (a stdio MCP server): the
   * same isolation, limits and network rule as exec. `release` removes what the line set up (its cgroup) once the
   * process has ended. Absent: such processes cannot run in this sandbox.
   */
  stdioLine?(command: string, args: string[], options?: { cwd?: string; env?: Record<string, string> }): Promise<StdioLine>;
  /**
   * The same long-lived process, for a sandbox whose processes are not children of this one (E2B): started inside the
   * sandbox with its limits and network rule, its stdin and stdout carried by the sandbox's API. A sandbox has
   * stdioLine or stdioProcess (or neither: such processes cannot run in it).
   */
  stdioProcess?(command: string, args: string[], options: StdioProcessOptions): Promise<StdioProcess>;
  /**
   * Unified diff of the workspace against the ref it was created from, bounded (lib/git/diff.ts DIFF_LIMITS): files
   * over the size limit are left out and named in a trailing `[<path>: 200 MB, left out of the diff]` note, and the
   * output is cut at its byte cap with a note. With `onLine` it is streamed instead of returned.
   */
  diff(options?: DiffOptions): Promise<string>;
  destroy(): Promise<void>;
}

/** Thrown for a path that would leave the workspace; its message is safe to show the model. */
export class PathEscapeError extends Error {
  constructor(public readonly requested: string) {
    super(`Path "${requested}" is outside the workspace. Use a relative path inside the repository.`);
    this.name = "PathEscapeError";
  }
}
