import { spawn, type ChildProcess } from "node:child_process";
import { getEnv } from "@/lib/env";

/*
 * Host-side git is spawned by a small helper process, not by the server itself. Linux's fork() copies the page tables
 * of the process that forks, so a spawn from the server (hundreds of MB resident: Next.js, the database client, the
 * Mermaid worker) blocks its one JS thread for tens of milliseconds (measured: 8 ms at 50 MB resident, 165 ms at 580 MB
 * on the 2-core VM), and a run makes hundreds of git calls — parallel tasks spent most of their time there, one spawn
 * after another. The helper is a bare Node process (`node -e`), started once and kept; it spawns each command with
 * exactly the argv, cwd, environment and stdin it is given, and returns the exit code and output. Where no helper
 * can run (Vercel: no long-lived processes) or it cannot start, commands are spawned directly, as before.
 */

export type ChildRequest = { file: string; args: string[]; cwd: string; env: Record<string, string>; input?: string | Buffer };
export type ChildResult = { code: number; stdout: Buffer; stderr: Buffer };
/** A streamed command's end: its exit code (1 when killed) and its stderr (its stdout went to the reader). */
export type StreamedResult = { code: number; stderr: Buffer };

/**
 * The helper: newline-delimited JSON requests on stdin, one JSON line per finished command on stdout. A `stream`
 * request's stdout comes back as it is read, in `out` lines (the command is paused while the helper's own output is
 * full, so a reader slower than the command holds it back rather than filling memory); `{kill: id}` stops it.
 */
const HELPER_SOURCE = `
const { spawn } = require("node:child_process");
const reply = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  let nl;
  while ((nl = buffered.indexOf("\\n")) >= 0) {
    const line = buffered.slice(0, nl);
    buffered = buffered.slice(nl + 1);
    let req;
    try { req = JSON.parse(line); } catch { continue; }
    if (req.kill !== undefined) { const c = children.get(req.kill); if (c) try { c.kill("SIGKILL"); } catch {} continue; }
    run(req);
  }
});
const children = new Map();
process.stdin.on("end", () => process.exit(0));
function run(req) {
  let done = false;
  const finish = (m) => { if (!done) { done = true; reply(m); } };
  let child;
  try {
    child = spawn(req.file, req.args, { cwd: req.cwd, env: req.env, stdio: ["pipe", "pipe", "pipe"] });
  } catch (e) {
    return finish({ id: req.id, error: String((e && e.message) || e) });
  }
  const out = [], err = [];
  if (req.stream) {
    children.set(req.id, child);
    child.stdout.on("data", (c) => {
      if (!process.stdout.write(JSON.stringify({ id: req.id, out: c.toString("base64") }) + "\\n")) {
        child.stdout.pause();
        process.stdout.once("drain", () => child.stdout.resume());
      }
    });
  } else child.stdout.on("data", (c) => out.push(c));
  child.stderr.on("data", (c) => err.push(c));
  child.stdin.on("error", () => {});
  child.on("error", (e) => { if (child.pid === undefined) finish({ id: req.id, error: String((e && e.message) || e) }); });
  child.on("close", (code) => { children.delete(req.id); finish({ id: req.id, code: code === null ? 1 : code, stdout: Buffer.concat(out).toString("base64"), stderr: Buffer.concat(err).toString("base64") }); });
  child.stdin.end(req.input ? Buffer.from(req.input, "base64") : "");
}
`;

type Pending = { resolve: (r: ChildResult) => void; reject: (e: Error) => void; onStdout?: (chunk: Buffer) => void };

class Helper {
  private readonly pending = new Map<number, Pending>();
  private next = 1;
  private buffered = "";

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => this.read(chunk));
    child.stdin!.on("error", () => this.fail(new Error("the git helper's input closed")));
    child.on("error", (error) => this.fail(error));
    child.on("exit", () => this.fail(new Error("the git helper exited")));
    this.idle();
  }

  static start(): Helper | null {
    try {
      const child = spawn(process.execPath, ["-e", HELPER_SOURCE], {
        // Nothing of the server's environment: each command is given its own, in full.
        env: { PATH: "/usr/local/bin:/usr/bin:/bin" } as unknown as NodeJS.ProcessEnv,
        stdio: ["pipe", "pipe", "ignore"],
      });
      if (child.pid === undefined) return null;
      return new Helper(child);
    } catch {
      return null;
    }
  }

  get alive() {
    return this.child.exitCode === null && this.child.signalCode === null && !this.failed;
  }

  private failed = false;

  run(req: ChildRequest, onStdout?: (chunk: Buffer, id: number) => void): Promise<ChildResult> {
    const id = this.next++;
    const input = req.input === undefined ? undefined : Buffer.from(req.input).toString("base64");
    const line = JSON.stringify({ id, file: req.file, args: req.args, cwd: req.cwd, env: req.env, input, stream: onStdout ? true : undefined });
    return new Promise<ChildResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onStdout: onStdout && ((chunk) => onStdout(chunk, id)) });
      this.busy();
      this.child.stdin!.write(`${line}\n`);
    });
  }

  kill(id: number) {
    if (this.pending.has(id)) this.child.stdin!.write(`${JSON.stringify({ kill: id })}\n`);
  }

  private read(chunk: string) {
    this.buffered += chunk;
    let nl: number;
    while ((nl = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      let msg: { id: number; code?: number; stdout?: string; stderr?: string; error?: string; out?: string };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const waiting = this.pending.get(msg.id);
      if (!waiting) continue;
      if (msg.out !== undefined) {
        waiting.onStdout?.(Buffer.from(msg.out, "base64"));
        continue;
      }
      this.pending.delete(msg.id);
      if (msg.error !== undefined) waiting.reject(Object.assign(new Error(msg.error), { spawnFailed: true }));
      else waiting.resolve({ code: msg.code ?? 1, stdout: Buffer.from(msg.stdout ?? "", "base64"), stderr: Buffer.from(msg.stderr ?? "", "base64") });
    }
    if (!this.pending.size) this.idle();
  }

  private fail(error: Error) {
    this.failed = true;
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }

  /** The helper keeps this process alive only while a command is out (as a directly spawned child would). */
  private busy() {
    this.child.ref();
    (this.child.stdout as unknown as { ref?: () => void }).ref?.();
    (this.child.stdin as unknown as { ref?: () => void }).ref?.();
  }

  private idle() {
    this.child.unref();
    (this.child.stdout as unknown as { unref?: () => void }).unref?.();
    (this.child.stdin as unknown as { unref?: () => void }).unref?.();
  }
}

let helper: Helper | null = null;
let unavailable = false;

function currentHelper(): Helper | null {
  if (unavailable) return null;
  if (helper?.alive) return helper;
  if (getEnv().VERCEL) {
    unavailable = true;
    return null;
  }
  helper = Helper.start();
  if (!helper) unavailable = true;
  return helper;
}

/** Run one command to its end through the helper (or directly, where there is none); rejects when it cannot start. */
export async function runChild(req: ChildRequest): Promise<ChildResult> {
  const h = currentHelper();
  if (h) return h.run(req);
  return runDirect(req);
}

/**
 * Run one command, its stdout handed to `onStdout` as it is read (never held whole); `onStdout` returning false stops
 * the command (SIGKILL). Through the helper, or directly where there is none; rejects when it cannot start.
 */
export async function streamChild(req: ChildRequest, onStdout: (chunk: Buffer) => boolean): Promise<StreamedResult> {
  const h = currentHelper();
  if (h) {
    let stopped = false;
    const { code, stderr } = await h.run(req, (chunk, id) => {
      if (stopped) return;
      if (onStdout(chunk) === false) {
        stopped = true;
        h.kill(id);
      }
    });
    return { code, stderr };
  }
  return new Promise((resolve, reject) => {
    const child = spawn(req.file, req.args, { cwd: req.cwd, env: req.env as NodeJS.ProcessEnv, stdio: ["ignore", "pipe", "pipe"] });
    const err: Buffer[] = [];
    let stopped = false;
    child.stdout.on("data", (c: Buffer) => {
      if (stopped) return;
      if (onStdout(c) === false) {
        stopped = true;
        child.kill("SIGKILL");
      }
    });
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stderr: Buffer.concat(err) }));
  });
}

function runDirect(req: ChildRequest): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(req.file, req.args, { cwd: req.cwd, env: req.env as NodeJS.ProcessEnv, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.stdin.on("error", () => {});
    child.stdin.end(req.input ?? "");
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }));
  });
}
