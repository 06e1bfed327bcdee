import { spawn } from "node:child_process";
import { open } from "node:fs/promises";
import { runGroup, type GroupResult } from "@/lib/git/spawner";
import type { ExecResult } from "./types";

export const DEFAULT_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

/** Keeps the first `max` bytes of a stream and counts the rest. */
class CappedBuffer {
  private chunks: Buffer[] = [];
  private kept = 0;
  total = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer) {
    this.total += chunk.length;
    const room = this.max - this.kept;
    if (room <= 0) return;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(part);
    this.kept += part.length;
  }
  get truncated() {
    return this.total > this.kept;
  }
  text(): string {
    return cappedText(Buffer.concat(this.chunks), this.total);
  }
}

/** The kept bytes of a stream of `total` bytes, with the cut marked when some were left out. */
function cappedText(kept: Buffer, total: number): string {
  const body = kept.toString("utf8");
  if (total <= kept.length) return body;
  return `${body}\n[output truncated by Gatehouse: ${total - kept.length} of ${total} bytes omitted]\n`;
}

/** The first `max` bytes of a file written by a detached command, with the cut marked as CappedBuffer marks it. */
export async function readCapped(file: string, max = DEFAULT_MAX_OUTPUT_BYTES): Promise<{ text: string; truncated: boolean }> {
  const handle = await open(file, "r").catch(() => null);
  if (!handle) return { text: "", truncated: false };
  try {
    const total = (await handle.stat()).size;
    const buffer = Buffer.alloc(Math.min(total, max));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const body = buffer.subarray(0, bytesRead).toString("utf8");
    if (total <= bytesRead) return { text: body, truncated: false };
    return { text: `${body}\n[output truncated by Gatehouse: ${total - bytesRead} of ${total} bytes omitted]\n`, truncated: true };
  } finally {
    await handle.close();
  }
}

export function killGroup(pid: number | undefined) {
  if (!pid) return;
  try {
    // Negative pid: the whole process group (the child was started as a session/group leader).
    process.kill(-pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

type RunProcessOptions = {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs?: number;
  maxOutputBytes?: number;
  stdin?: string;
  signal?: AbortSignal;
};

/**
 * Run a program with an argument array (no shell), in its own process group, with a timeout that kills the whole group
 * and each output stream capped at `maxOutputBytes` (the rest is drained and counted, and the cut is marked).
 * After the program exits, anything it left running in its group is killed too. Spawned by the spawn helper
 * (lib/git/spawner.ts: a fork of the large server costs tens of milliseconds), which keeps the timeout, the caps and
 * the group kills; directly where there is no helper.
 */
export async function runProcess(options: RunProcessOptions): Promise<ExecResult> {
  const { file, args, cwd, env, timeoutMs = DEFAULT_TIMEOUT_MS, maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES, stdin, signal } = options;
  const started = Date.now();
  const viaHelper = runGroup({ file, args, cwd, env, input: stdin, timeoutMs, maxOutputBytes }, signal);
  if (!viaHelper) return runDirect(options);
  let r: GroupResult;
  try {
    r = await viaHelper;
  } catch (error) {
    // The helper ended under the command (and took its group down): the command's result is lost, not retried.
    const why = `[Gatehouse: the command's result was lost: ${error instanceof Error ? error.message : String(error)}]\n`;
    return { exitCode: null, stdout: "", stderr: why, timedOut: false, truncated: false, durationMs: Date.now() - started };
  }
  const durationMs = Date.now() - started;
  if (r.spawnError) {
    const missing = r.spawnError.code === "ENOENT";
    const stderr = `${file}: ${missing ? "command not found" : r.spawnError.message}\n`;
    return { exitCode: missing ? 127 : 126, stdout: "", stderr, timedOut: r.timedOut, truncated: false, durationMs };
  }
  return {
    exitCode: r.timedOut ? null : (r.code ?? (r.signal ? 128 + 9 : null)),
    stdout: cappedText(r.stdout, r.stdoutTotal),
    stderr: cappedText(r.stderr, r.stderrTotal),
    timedOut: r.timedOut,
    truncated: r.stdoutTotal > r.stdout.length || r.stderrTotal > r.stderr.length,
    durationMs,
  };
}

/** runProcess spawned from this process (no helper). */
function runDirect({
  file,
  args,
  cwd,
  env,
  timeoutMs = DEFAULT_TIMEOUT_MS,
  maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES,
  stdin,
  signal,
}: RunProcessOptions): Promise<ExecResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    const out = new CappedBuffer(maxOutputBytes);
    const err = new CappedBuffer(maxOutputBytes);
    let timedOut = false;
    let settled = false;
    const child = spawn(file, args, { cwd, env: env as NodeJS.ProcessEnv, detached: true, stdio: ["pipe", "pipe", "pipe"], shell: false });
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, timeoutMs);
    const abort = () => killGroup(child.pid);
    if (signal?.aborted) abort();
    else signal?.addEventListener("abort", abort, { once: true });
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.stdin.on("error", () => {});
    child.stdin.end(stdin ?? "");

    const finish = (exitCode: number | null, extraErr = "") => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", abort);
      resolve({
        exitCode,
        stdout: out.text(),
        stderr: err.text() + extraErr,
        timedOut,
        truncated: out.truncated || err.truncated,
        durationMs: Date.now() - started,
      });
    };
    child.on("error", (error: NodeJS.ErrnoException) => {
      finish(error.code === "ENOENT" ? 127 : 126, `${file}: ${error.code === "ENOENT" ? "command not found" : error.message}\n`);
    });
    child.on("exit", () => {
      // Background children may still hold the pipes open; they die with the group.
      killGroup(child.pid);
    });
    child.on("close", (code, signal) => {
      finish(timedOut ? null : (code ?? (signal ? 128 + 9 : null)));
    });
  });
}
