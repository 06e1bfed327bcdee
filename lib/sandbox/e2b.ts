import path from "node:path";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { bigFileConfig, DIFF_LIMITS, DiffReader, withNotes, type DiffOptions } from "@/lib/git/diff";
import { git, gitEnv, SAFE_CONFIG } from "@/lib/git/run";
import { randomUUID } from "node:crypto";
import { LocalSandbox, lostCommand, sanitizeEnv } from "./local";
import { DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS } from "./process";
import {
  PathEscapeError,
  type DetachedStatus,
  type ExecOptions,
  type ExecResult,
  type FileEntry,
  type Sandbox,
  type StdioProcess,
  type StdioProcessOptions,
} from "./types";

export type E2BRunOptions = { cwd?: string; envs?: Record<string, string>; timeoutMs?: number };
export type E2BCommandResult = { exitCode: number; stdout: string; stderr: string };
/** The slice of e2b's CommandHandle we use: `wait()` throws a CommandExitError (with `exitCode`) for a non-zero exit. */
export type E2BCommandHandle = { pid: number; wait(): Promise<E2BCommandResult>; kill(): Promise<boolean> };

/** The slice of @e2b/code-interpreter we use, so tests can substitute a fake without the network. */
export type E2BRemote = {
  sandboxId: string;
  files: {
    write(path: string, data: string | ArrayBuffer): Promise<unknown>;
    read(path: string): Promise<string>;
  };
  commands: {
    run(cmd: string, opts: E2BRunOptions & { background?: false }): Promise<E2BCommandResult>;
    /** A background command (e2b's `CommandHandle`): started, not awaited; `stdin: true` keeps its stdin open. */
    run(cmd: string, opts: E2BRunOptions & { background: true; stdin?: boolean; onStdout?: (data: string) => void; onStderr?: (data: string) => void }): Promise<E2BCommandHandle>;
    /** Send data to a command started with `stdin: true`. */
    sendStdin(pid: number, data: string): Promise<void>;
  };
  kill(): Promise<unknown>;
};

/** Compile-time proof that the real SDK's sandbox has the shape of this slice (a change in e2b's types fails typecheck). */
type FitsE2BRemote<T extends E2BRemote> = T;
export type E2BSdkSandboxFits = FitsE2BRemote<import("@e2b/code-interpreter").Sandbox>;

export type E2BCreateOptions = {
  apiKey: string;
  template?: string;
  timeoutMs: number;
  allowInternetAccess: boolean;
  metadata: Record<string, string>;
};

export type E2BClient = { create(options: E2BCreateOptions): Promise<E2BRemote> };

/** The real client: @e2b/code-interpreter, loaded only when an E2B sandbox is created. */
export const defaultE2BClient: E2BClient = {
  async create({ template, ...options }) {
    const { Sandbox } = await import("@e2b/code-interpreter");
    const sandbox = template ? await Sandbox.create(template, options) : await Sandbox.create(options);
    return sandbox as unknown as E2BRemote;
  },
};

/** Quote one word for a POSIX shell: the E2B API takes a command string, so every argument is passed as data. */
/** The most of a remote diff held in memory at once (the E2B API returns a command's output whole). */
const E2B_DIFF_CAP = 128 * 1024 * 1024;

export function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

export type E2BSandboxOptions = {
  runId: string;
  repoPath: string;
  ref: string;
  branch?: string;
  excludePaths?: string[];
  /** Outbound internet from the sandbox (default off; a project may allow it in .autonomous/config.json). */
  allowInternet?: boolean;
  client?: E2BClient;
  apiKey?: string;
  template?: string;
  /** Where the repository is unpacked inside the E2B sandbox. */
  remoteRoot?: string;
  /** Lifetime of the remote sandbox; E2B kills it after this even if destroy() is never called. */
  lifetimeMs?: number;
};

function capText(text: string, max: number): { text: string; truncated: boolean } {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return { text, truncated: false };
  const kept = bytes.subarray(0, max).toString("utf8");
  return {
    text: `${kept}\n[output truncated by Gatehouse: ${bytes.length - max} of ${bytes.length} bytes omitted]\n`,
    truncated: true,
  };
}

/**
 * A run's sandbox on E2B. The repository at `ref` is uploaded (git archive) and committed inside as the base; commands
 * run there; `syncToWorkspace()` brings the changes back into a local git worktree (the `workspace`), where
 * checkpoints and records are committed exactly as for the local sandbox.
 */
export class E2BSandbox implements Sandbox {
  readonly kind = "e2b" as const;
  readonly isolated = true;
  readonly id: string;

  private constructor(
    private readonly remote: E2BRemote,
    /** The local worktree that mirrors the remote workspace for git (never used to run commands). */
    readonly workspace: LocalSandbox,
    readonly remoteRoot: string,
    readonly allowInternet: boolean,
  ) {
    this.id = `e2b_${remote.sandboxId}`;
  }

  get workspacePath(): string {
    return this.workspace.workspacePath;
  }

  get location() {
    return this.workspace.location;
  }

  static async create(options: E2BSandboxOptions): Promise<E2BSandbox> {
    const apiKey = options.apiKey ?? getEnv().E2B_API_KEY;
    if (!apiKey) throw new AppError("unavailable:sandbox", "E2B_API_KEY is not set.");
    const client = options.client ?? defaultE2BClient;
    const remoteRoot = options.remoteRoot ?? "/home/user/repo";
    const allowInternet = options.allowInternet ?? false;
    const workspace = await LocalSandbox.create({
      runId: options.runId,
      repoPath: options.repoPath,
      ref: options.ref,
      branch: options.branch,
      excludePaths: options.excludePaths,
      isolation: "none",
    });
    let remote: E2BRemote | undefined;
    try {
      remote = await client.create({
        apiKey,
        template: options.template ?? getEnv().GATEHOUSE_E2B_TEMPLATE,
        timeoutMs: options.lifetimeMs ?? 60 * 60_000,
        allowInternetAccess: allowInternet,
        metadata: { gatehouseRunId: options.runId },
      });
      const sandbox = new E2BSandbox(remote, workspace, remoteRoot, allowInternet);
      await sandbox.upload();
      return sandbox;
    } catch (error) {
      await remote?.kill().catch(() => {});
      await workspace.destroy();
      throw error;
    }
  }

  /** Put the worktree's HEAD into the remote sandbox and commit it there as the base for diffs. */
  private async upload() {
    const head = await this.workspace.head();
    const archive = await new Promise<Buffer>((resolve, reject) => {
      import("node:child_process").then(({ spawn }) => {
        const child = spawn("git", [...SAFE_CONFIG, "--git-dir", this.location.gitDir, "archive", "--format=tar", head], {
          cwd: this.workspace.workspacePath,
          env: gitEnv() as NodeJS.ProcessEnv,
        });
        const chunks: Buffer[] = [];
        child.stdout.on("data", (c: Buffer) => chunks.push(c));
        child.on("error", reject);
        child.on("close", (code) => (code === 0 ? resolve(Buffer.concat(chunks)) : reject(new AppError("internal:git", "git archive failed"))));
      }, reject);
    });
    const tarPath = `${this.remoteRoot}.upload.tar`;
    await this.remote.files.write(tarPath, archive.buffer.slice(archive.byteOffset, archive.byteOffset + archive.byteLength) as ArrayBuffer);
    const root = shellQuote(this.remoteRoot);
    await this.sh(
      `mkdir -p ${root} && tar -xf ${shellQuote(tarPath)} -C ${root} && rm -f ${shellQuote(tarPath)} && cd ${root} && ` +
        `git init -q && git add -A && git -c user.name=Gatehouse -c user.email=gatehouse@localhost -c commit.gpgSign=false ` +
        `commit -q --allow-empty -m base && git tag gatehouse-base`,
    );
  }

  private async sh(script: string, opts: E2BRunOptions = {}) {
    try {
      return await this.remote.commands.run(script, opts);
    } catch (error) {
      // The SDK throws CommandExitError (which carries the result) for a non-zero exit.
      const e = error as { exitCode?: number; stdout?: string; stderr?: string };
      if (typeof e.exitCode === "number") return { exitCode: e.exitCode, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
      throw error;
    }
  }

  /** Lexical confinement (the remote filesystem cannot be realpath'd from here), then a remote symlink check. */
  private async remotePath(requested: string): Promise<string> {
    if (typeof requested !== "string" || requested.includes("\0")) throw new PathEscapeError(String(requested));
    if (path.posix.isAbsolute(requested) || requested.startsWith("~")) throw new PathEscapeError(requested);
    const segments = requested.split(/[\\/]+/).filter((s) => s !== "" && s !== ".");
    if (segments.includes("..") || segments[0] === ".git") throw new PathEscapeError(requested);
    const abs = path.posix.join(this.remoteRoot, ...segments);
    const check = await this.sh(`realpath -m -- ${shellQuote(abs)}`);
    const real = check.stdout.trim();
    if (check.exitCode === 0 && real !== this.remoteRoot && !real.startsWith(`${this.remoteRoot}/`)) {
      throw new PathEscapeError(requested);
    }
    return abs;
  }

  readFile = async (requested: string): Promise<string> => this.remote.files.read(await this.remotePath(requested));

  writeFile = async (requested: string, content: string): Promise<void> => {
    await this.remote.files.write(await this.remotePath(requested), content);
  };

  listFiles = async (requested = ".", options: { recursive?: boolean } = {}): Promise<FileEntry[]> => {
    const abs = await this.remotePath(requested);
    const depth = options.recursive ? [] : ["-maxdepth", "1"];
    const r = await this.sh(
      ["find", abs, "-mindepth", "1", ...depth, "-not", "-path", `${this.remoteRoot}/.git`, "-not", "-path", `${this.remoteRoot}/.git/*`, "-printf", "%y %s %P\\n"]
        .map(shellQuote)
        .join(" "),
    );
    const base = path.posix.relative(this.remoteRoot, abs);
    return r.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => {
        const [type, size, ...rest] = line.split(" ");
        const rel = path.posix.join(base, rest.join(" "));
        return type === "d" ? { path: rel, type: "dir" as const } : { path: rel, type: "file" as const, size: Number(size) };
      })
      .sort((a, b) => a.path.localeCompare(b.path));
  };

  exec = async (command: string, args: string[], options: ExecOptions = {}): Promise<ExecResult> => {
    const cwd = await this.remotePath(options.cwd ?? ".");
    const started = Date.now();
    const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const line = [command, ...args].map(shellQuote).join(" ");
    const script = options.stdin === undefined ? line : `printf %s ${shellQuote(options.stdin)} | ${line}`;
    try {
      const r = await this.sh(script, { cwd, envs: sanitizeEnv(options.env), timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS });
      const out = capText(r.stdout, max);
      const err = capText(r.stderr, max);
      return { exitCode: r.exitCode, stdout: out.text, stderr: err.text, timedOut: false, truncated: out.truncated || err.truncated, durationMs: Date.now() - started };
    } catch (error) {
      if ((error as Error).name === "TimeoutError") {
        return { exitCode: null, stdout: "", stderr: "Command timed out.\n", timedOut: true, truncated: false, durationMs: Date.now() - started };
      }
      throw error;
    }
  };

  /**
   * A long-lived process (a stdio MCP server) in the remote sandbox: a background command with its stdin kept open,
   * `exec`'d so that killing the command kills the program itself. It runs as exec's commands do — inside the
   * workspace, with the sanitized environment, under the sandbox's network rule (set when the sandbox was created) — and
   * E2B kills it at `timeoutMs`.
   */
  stdioProcess = async (command: string, args: string[], options: StdioProcessOptions): Promise<StdioProcess> => {
    if (typeof command !== "string" || command === "" || !Array.isArray(args)) {
      throw new AppError("bad_request:sandbox", "exec needs a program name and an argument array.");
    }
    const cwd = await this.remotePath(options.cwd ?? ".");
    const line = `exec ${[command, ...args].map(shellQuote).join(" ")}`;
    const handle = await this.remote.commands.run(line, {
      background: true,
      stdin: true,
      cwd,
      envs: sanitizeEnv(options.env),
      timeoutMs: options.timeoutMs,
      onStdout: (data) => options.onStdout(data),
      onStderr: (data) => options.onStderr?.(data),
    });
    let ended = false;
    const end = (result: { exitCode: number | null; error?: string }) => {
      if (ended) return;
      ended = true;
      options.onExit(result);
    };
    handle.wait().then(
      (r) => end({ exitCode: r.exitCode }),
      (error: { exitCode?: unknown; message?: string }) =>
        end({ exitCode: typeof error.exitCode === "number" ? error.exitCode : null, error: String(error.message ?? error).slice(0, 500) }),
    );
    return {
      write: async (data) => {
        if (ended) throw new Error("The process has ended.");
        await this.remote.commands.sendStdin(handle.pid, data);
      },
      kill: async () => {
        if (!ended) await handle.kill().catch(() => false);
      },
    };
  };

  /**
   * A detached command in the remote sandbox: started in its own session under a small sh that writes its exit code,
   * with its output in files beside the repository (`<remoteRoot>.commands/<id>`), never inside it. The remote sandbox
   * lives as long as this process: after a restart its commands are gone (detachedStatus says so; lostCommand).
   */
  startDetached = async (command: string, args: string[], options: Omit<ExecOptions, "signal" | "stdin"> = {}): Promise<{ id: string }> => {
    const cwd = await this.remotePath(options.cwd ?? ".");
    const id = randomUUID();
    const dir = shellQuote(this.detachedDir(id));
    const line = [command, ...args].map(shellQuote).join(" ");
    const inner = `${line} >${dir}/stdout 2>${dir}/stderr </dev/null; echo $? >${dir}/exit.tmp; mv ${dir}/exit.tmp ${dir}/exit`;
    const meta = `${Date.now()} ${options.timeoutMs ?? DEFAULT_TIMEOUT_MS} ${options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES}`;
    const r = await this.sh(`mkdir -p ${dir} && echo ${shellQuote(meta)} >${dir}/meta && { setsid sh -c ${shellQuote(inner)} >/dev/null 2>&1 & echo $! >${dir}/pid; }`, {
      cwd,
      envs: sanitizeEnv(options.env),
    });
    if (r.exitCode !== 0) throw new AppError("internal:sandbox", `Could not start the command in the E2B sandbox: ${r.stderr.slice(0, 500)}`);
    return { id };
  };

  detachedStatus = async (id: string): Promise<DetachedStatus> => {
    const dir = shellQuote(this.detachedDir(id));
    const look = await this.sh(`cd ${dir} 2>/dev/null || exit 0; cat meta; cat pid; if [ -f exit ]; then cat exit; elif kill -0 "$(cat pid)" 2>/dev/null; then echo running; elif [ -f exit ]; then cat exit; else echo lost; fi`);
    const [metaLine, pidLine, state] = look.stdout.split("\n").map((l) => l.trim());
    if (!metaLine || !pidLine || !state) return lostCommand();
    const [startedAt, timeoutMs, max] = metaLine.split(" ").map(Number) as [number, number, number];
    let exit = state;
    if (exit === "running") {
      if (Date.now() - startedAt <= timeoutMs) return { state: "running" };
      exit = "timeout";
    }
    if (!/^\d+$/.test(exit) && exit !== "killed") {
      // Recorded, so every later look reports the same end.
      await this.sh(`kill -KILL -- -${Number(pidLine)} 2>/dev/null; [ -f ${dir}/exit ] || echo ${exit} >${dir}/exit`);
    }
    const read = await this.sh(`cd ${dir} && wc -c <stdout && wc -c <stderr && stat -c %Y exit`);
    const [outSize, errSize, endedS] = read.stdout.split("\n").map((l) => Number(l.trim()));
    const out = await this.sh(`head -c ${max} ${dir}/stdout`);
    const err = await this.sh(`head -c ${max} ${dir}/stderr`);
    const cut = (text: string, total: number) =>
      total > max ? { text: `${text}\n[output truncated by Gatehouse: ${total - max} of ${total} bytes omitted]\n`, truncated: true } : { text, truncated: false };
    const o = cut(out.stdout, outSize ?? 0);
    const e = cut(err.stdout, errSize ?? 0);
    const note = exit === "lost" ? "\n[the command ended without an exit code]\n" : exit === "killed" ? "\n[killed]\n" : "";
    return {
      state: "exited",
      result: {
        exitCode: /^\d+$/.test(exit) ? Number(exit) : null,
        stdout: o.text,
        stderr: e.text + note,
        timedOut: exit === "timeout",
        truncated: o.truncated || e.truncated,
        durationMs: Math.max(0, (endedS ?? 0) * 1000 - startedAt),
      },
    };
  };

  killDetached = async (id: string): Promise<void> => {
    const dir = shellQuote(this.detachedDir(id));
    await this.sh(`cd ${dir} 2>/dev/null || exit 0; [ -f exit ] && exit 0; kill -KILL -- -"$(cat pid)" 2>/dev/null; echo killed >exit`);
  };

  private detachedDir(id: string): string {
    if (!/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new AppError("bad_request:sandbox", `Invalid detached command id: ${id}`);
    return `${this.remoteRoot}.commands/${id}`;
  }

  diff = async (options: DiffOptions = {}): Promise<string> => {
    // The remote output arrives whole, so it is cut remotely too (at most E2B_DIFF_CAP even when streamed).
    const maxFileBytes = options.maxFileBytes ?? DIFF_LIMITS.fileBytes;
    const cap = Math.min(options.maxBytes ?? (options.onLine ? Infinity : DIFF_LIMITS.totalBytes), E2B_DIFF_CAP);
    const r = await this.sh(
      `git add -A -N && { git ${bigFileConfig(maxFileBytes).join(" ")} diff --no-color --no-ext-diff --no-textconv gatehouse-base -- . ':(exclude).autonomous' | head -c ${cap + 1}; }`,
      { cwd: this.remoteRoot },
    );
    if (r.exitCode !== 0) throw new AppError("internal:sandbox", `diff failed in the E2B sandbox: ${r.stderr.slice(0, 500)}`);
    const reader = new DiffReader({
      cap,
      maxFileBytes,
      onLine: options.onLine,
      onEnd: options.onEnd,
      sizeOf: async (p) => {
        const size = await this.sh(`stat -c %s -- ${shellQuote(p)}`, { cwd: this.remoteRoot });
        return size.exitCode === 0 && /^\d+$/.test(size.stdout.trim()) ? Number(size.stdout.trim()) : null;
      },
    });
    reader.feed(r.stdout);
    const diff = await reader.end();
    return options.onLine ? "" : withNotes(diff);
  };

  /**
   * Bring the remote changes made since the last sync into the local worktree (a binary patch applied with git), then
   * mark them synced remotely, so the next sync carries only newer changes.
   */
  syncToWorkspace = async (): Promise<void> => {
    const r = await this.sh(`git add -A && git diff --cached --binary HEAD`, { cwd: this.remoteRoot });
    if (r.exitCode !== 0) throw new AppError("internal:sandbox", `sync failed in the E2B sandbox: ${r.stderr.slice(0, 500)}`);
    if (r.stdout.trim() !== "") {
      // git apply refuses paths with a `.git` component and paths beyond a symlink: the patch brings back files only,
      // never git metadata.
      await git(this.workspace.workspacePath, ["apply", "--binary", "--whitespace=nowarn", "-"], {
        input: r.stdout.endsWith("\n") ? r.stdout : `${r.stdout}\n`,
        worktree: this.location,
      });
    }
    await this.sh(`git -c user.name=Gatehouse -c user.email=gatehouse@localhost -c commit.gpgSign=false commit -q --allow-empty -m synced`, {
      cwd: this.remoteRoot,
    });
  };

  destroy = async (): Promise<void> => {
    try {
      await this.remote.kill();
    } finally {
      await this.workspace.destroy();
    }
  };
}
