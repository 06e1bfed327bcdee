import { spawn } from "node:child_process";
import { open } from "node:fs/promises";
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
    const body = Buffer.concat(this.chunks).toString("utf8");
    if (!this.truncated) return body;
    return `${body}\n[output truncated by Gatehouse: ${this.total - this.kept} of ${this.total} bytes omitted]\n`;
  }
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

/**
 * Run a program with an argument array (no shell), in its own process group, with a timeout that kills the whole group
 * and each output stream capped at `maxOutputBytes` (the rest is drained and counted, and the cut is marked).
 * After the program exits, anything it left running in its group is killed too.
 */
export function runProcess({
  file,
  args,
  cwd,
  env,
  timeoutMs = DEFAULT_TIMEOUT_MS,
  maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES,
  stdin,
  signal,
}: {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs?: number;
  maxOutputBytes?: number;
  stdin?: string;
  signal?: AbortSignal;
}): Promise<ExecResult> {
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
