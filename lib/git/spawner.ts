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

/** The helper: newline-delimited JSON requests on stdin, one JSON line per finished command on stdout. */
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
    run(req);
  }
});
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
  child.stdout.on("data", (c) => out.push(c));
  child.stderr.on("data", (c) => err.push(c));
  child.stdin.on("error", () => {});
  child.on("error", (e) => { if (child.pid === undefined) finish({ id: req.id, error: String((e && e.message) || e) }); });
  child.on("close", (code) => finish({ id: req.id, code: code === null ? 1 : code, stdout: Buffer.concat(out).toString("base64"), stderr: Buffer.concat(err).toString("base64") }));
  child.stdin.end(req.input ? Buffer.from(req.input, "base64") : "");
}
`;

type Pending = { resolve: (r: ChildResult) => void; reject: (e: Error) => void };

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

  run(req: ChildRequest): Promise<ChildResult> {
    const id = this.next++;
    const input = req.input === undefined ? undefined : Buffer.from(req.input).toString("base64");
    const line = JSON.stringify({ id, file: req.file, args: req.args, cwd: req.cwd, env: req.env, input });
    return new Promise<ChildResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.busy();
      this.child.stdin!.write(`${line}\n`);
    });
  }

  private read(chunk: string) {
    this.buffered += chunk;
    let nl: number;
    while ((nl = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      let msg: { id: number; code?: number; stdout?: string; stderr?: string; error?: string };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const waiting = this.pending.get(msg.id);
      if (!waiting) continue;
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
