import { spawn, type ChildProcess } from "node:child_process";
import { getEnv } from "@/lib/env";

/*
 * Host-side git, and the local sandbox's commands (bubblewrap), are spawned by a small helper process, not by the
 * server itself. Linux's fork() copies the page tables of the process that forks, so a spawn from the server (hundreds
 * of MB resident: Next.js, the database client, the Mermaid worker) blocks its one JS thread for tens of milliseconds
 * (measured: 8 ms at 50 MB resident, 165 ms at 580 MB on the 2-core VM), and a run makes hundreds of git calls and
 * sandboxed commands — parallel tasks spent most of their time there, one spawn after another. The helper is a bare Node
 * process (`node -e`), started once and kept; it spawns each command with exactly the argv, cwd, environment and stdin
 * it is given, and returns the exit code and output. Where no helper can run (Vercel: no long-lived processes) or it
 * cannot start, commands are spawned directly, as before.
 */

export type ChildRequest = { file: string; args: string[]; cwd: string; env: Record<string, string>; input?: string | Buffer };
export type ChildResult = { code: number; stdout: Buffer; stderr: Buffer };
/** A streamed command's end: its exit code (1 when killed) and its stderr (its stdout went to the reader). */
export type StreamedResult = { code: number; stderr: Buffer };

/**
 * What a command run in a process group of its own (runGroup: the local sandbox's commands) comes back with: its exit
 * code or signal, whether its timeout killed it, and the first `maxOutputBytes` of each stream with each one's full
 * length (the rest was read and counted, not kept). `spawnError`: it could not start.
 */
export type GroupRequest = ChildRequest & { timeoutMs: number; maxOutputBytes: number };
export type GroupResult = {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTotal: number;
  stderrTotal: number;
  spawnError: { code: string | null; message: string } | null;
};

/**
 * The helper: newline-delimited JSON requests on stdin, one JSON line per finished command on stdout. A request with
 * `group` runs in a process group of its own (a new session) with its timeout and output caps kept here, and the whole
 * group is killed at the timeout, on a `{"kill": id}` request (the caller's cancel) and once its leader exits (what it
 * left running in the background goes with it) — as runProcess (lib/sandbox/process.ts) does when it spawns directly.
 * A `stream` request's stdout comes back as it is read, in `chunk` lines (the command is paused while the helper's own
 * output is full, so a reader slower than the command holds it back rather than filling memory); `{kill: id}` stops it.
 */
const HELPER_SOURCE = `
const { spawn } = require("node:child_process");
const reply = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
const groups = new Map();
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
    if (req.kill !== undefined) {
      const c = children.get(req.kill);
      if (c) { try { c.kill("SIGKILL"); } catch {} } else killGroup(groups.get(req.kill));
    } else if (req.detach) detach(req);
    else if (req.group) runGroup(req);
    else run(req);
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
      if (!process.stdout.write(JSON.stringify({ id: req.id, chunk: c.toString("base64") }) + "\\n")) {
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
function detach(req) {
  let child;
  try {
    child = spawn(req.file, req.args, { cwd: req.cwd, env: req.env, detached: true, stdio: "ignore" });
  } catch (e) {
    return reply({ id: req.id, pid: 0 });
  }
  child.on("error", () => {});
  child.unref();
  reply({ id: req.id, pid: child.pid || 0 });
}
function killGroup(pid) {
  if (!pid) return;
  try { process.kill(-pid, "SIGKILL"); } catch {}
}
function capped(max) {
  const chunks = [];
  let kept = 0, total = 0;
  return {
    push(c) { total += c.length; const room = max - kept; if (room <= 0) return; const part = c.length > room ? c.subarray(0, room) : c; chunks.push(part); kept += part.length; },
    total: () => total,
    data: () => Buffer.concat(chunks).toString("base64"),
  };
}
function runGroup(req) {
  const out = capped(req.maxOutputBytes), err = capped(req.maxOutputBytes);
  let timedOut = false, done = false, timer = null, child;
  const finish = (m) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    groups.delete(req.id);
    reply({ id: req.id, group: true, timedOut, out: out.data(), outTotal: out.total(), err: err.data(), errTotal: err.total(), ...m });
  };
  try {
    child = spawn(req.file, req.args, { cwd: req.cwd, env: req.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  } catch (e) {
    return finish({ spawnError: { code: (e && e.code) || null, message: String((e && e.message) || e) } });
  }
  groups.set(req.id, child.pid);
  timer = setTimeout(() => { timedOut = true; killGroup(child.pid); }, req.timeoutMs);
  child.stdout.on("data", (c) => out.push(c));
  child.stderr.on("data", (c) => err.push(c));
  child.stdin.on("error", () => {});
  child.on("error", (e) => finish({ spawnError: { code: (e && e.code) || null, message: String((e && e.message) || e) } }));
  child.on("exit", () => killGroup(child.pid));
  child.on("close", (code, signal) => finish({ code, signal }));
  child.stdin.end(req.input ? Buffer.from(req.input, "base64") : "");
}
`;

type Reply = {
  id: number;
  code?: number | null;
  stdout?: string;
  stderr?: string;
  error?: string;
  group?: true;
  signal?: string | null;
  timedOut?: boolean;
  out?: string;
  outTotal?: number;
  err?: string;
  errTotal?: number;
  spawnError?: { code: string | null; message: string };
  pid?: number;
  chunk?: string;
};
type Pending = { settle: (m: Reply) => void; reject: (e: Error) => void; onStdout?: (chunk: Buffer) => void };

class Helper {
  private readonly pending = new Map<number, Pending>();
  private next = 1;
  private buffered = "";

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => this.read(chunk));
    child.stdin!.on("error", () => this.fail(new Error("the spawn helper's input closed")));
    child.on("error", (error) => this.fail(error));
    child.on("exit", () => this.fail(new Error("the spawn helper exited")));
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

  /** One command to its end; with `onStdout`, its stdout is handed over as it is read (a `stream` request). */
  run(req: ChildRequest, onStdout?: (chunk: Buffer, id: number) => void): Promise<ChildResult> {
    return new Promise<ChildResult>((resolve, reject) => {
      let id = 0;
      const settle = (msg: Reply) => {
        if (msg.error !== undefined) reject(Object.assign(new Error(msg.error), { spawnFailed: true }));
        else resolve({ code: msg.code ?? 1, stdout: Buffer.from(msg.stdout ?? "", "base64"), stderr: Buffer.from(msg.stderr ?? "", "base64") });
      };
      id = this.send(req, onStdout ? { stream: true } : {}, { settle, reject, onStdout: onStdout && ((chunk) => onStdout(chunk, id)) });
    });
  }

  /** A command in a process group of its own, killed (the whole group) when `signal` aborts. */
  runGroup(req: GroupRequest, signal?: AbortSignal): Promise<GroupResult> {
    return new Promise<GroupResult>((resolve, reject) => {
      let id = 0;
      const kill = () => this.pending.has(id) && this.write({ kill: id });
      const done = () => signal?.removeEventListener("abort", kill);
      const settle = (msg: Reply) => {
        done();
        resolve({
          code: msg.code ?? null,
          signal: msg.signal ?? null,
          timedOut: msg.timedOut === true,
          stdout: Buffer.from(msg.out ?? "", "base64"),
          stderr: Buffer.from(msg.err ?? "", "base64"),
          stdoutTotal: msg.outTotal ?? 0,
          stderrTotal: msg.errTotal ?? 0,
          spawnError: msg.spawnError ?? null,
        });
      };
      id = this.send(req, { group: true, timeoutMs: req.timeoutMs, maxOutputBytes: req.maxOutputBytes }, { settle, reject: (e) => (done(), reject(e)) });
      if (signal?.aborted) kill();
      else signal?.addEventListener("abort", kill, { once: true });
    });
  }

  /** A command started in a session of its own and left running (its output goes where its argv sends it). */
  detach(req: ChildRequest): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.send(req, { detach: true }, { settle: (msg) => resolve(msg.pid ?? 0), reject });
    });
  }

  private send(req: ChildRequest, extra: Record<string, unknown>, waiting: Pending): number {
    const id = this.next++;
    const input = req.input === undefined ? undefined : Buffer.from(req.input).toString("base64");
    this.pending.set(id, waiting);
    this.busy();
    this.write({ id, file: req.file, args: req.args, cwd: req.cwd, env: req.env, input, ...extra });
    return id;
  }

  private write(message: Record<string, unknown>) {
    this.child.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  kill(id: number) {
    if (this.pending.has(id)) this.write({ kill: id });
  }

  private read(chunk: string) {
    this.buffered += chunk;
    let nl: number;
    while ((nl = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      let msg: Reply;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const waiting = this.pending.get(msg.id);
      if (!waiting) continue;
      if (msg.chunk !== undefined) {
        waiting.onStdout?.(Buffer.from(msg.chunk, "base64"));
        continue;
      }
      this.pending.delete(msg.id);
      waiting.settle(msg);
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
 * Run one command in a process group of its own through the helper (see GroupRequest), or null where there is no
 * helper: the caller spawns it directly. Rejects when the helper ends while the command runs (whose group it takes
 * down: bubblewrap dies with its parent).
 */
export function runGroup(req: GroupRequest, signal?: AbortSignal): Promise<GroupResult> | null {
  const h = currentHelper();
  return h ? h.runGroup(req, signal) : null;
}

/**
 * Start a command in a session of its own and leave it running, through the helper: its pid (0 when it could not
 * start), or null where there is no helper (the caller spawns it directly).
 */
export function startDetachedChild(req: ChildRequest): Promise<number> | null {
  const h = currentHelper();
  return h ? h.detach(req) : null;
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
