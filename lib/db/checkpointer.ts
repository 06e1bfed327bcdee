import { Worker } from "node:worker_threads";

/**
 * WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past 1,000
 * pages, on whichever connection made it: a few milliseconds (an fsync of the WAL, pages copied back into the database,
 * an fsync of the database) spent on the event loop, in the middle of a request, a step or a resume. Measured on the
 * executor's resume path, those commits were the slowest 1–2 % of all resumes (3–6 ms instead of 1.5).
 *
 * So the native writer (lib/db/statements.ts), which makes almost every commit of the process, commits without it
 * (`wal_autocheckpoint = 0`), and a worker thread with a connection of its own runs PASSIVE checkpoints: they copy
 * what no reader still needs and never wait for, nor block, the writer or a reader. The worker is asked after every
 * CHECKPOINT_EVERY_COMMITS commits of the writer, and once a second while anything was written since its last
 * checkpoint (the client's own commits, which keep SQLite's automatic checkpoint, included).
 *
 * If the worker cannot start or fails, the writer goes back to SQLite's automatic checkpoint (warned once): the WAL
 * never grows without bound because of this.
 */

/** Writer commits between checkpoint requests: at the 2–8 pages an append or a step writes, about SQLite's 1,000. */
export const CHECKPOINT_EVERY_COMMITS = 300;
/** While idle of commits, anything written since the last checkpoint is checkpointed within this long. */
const CHECKPOINT_INTERVAL_MS = 1000;
/** SQLite's own default for `wal_autocheckpoint`, restored on the writer if the worker fails. */
export const SQLITE_AUTOCHECKPOINT_PAGES = 1000;

/** The worker, as CommonJS source: evaluated, so no bundler ever has to find or transform a file for it. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(require.resolve("libsql", { paths: [workerData.cwd] }));
const db = new Database(workerData.file, { timeout: workerData.timeoutMs });
db.exec("PRAGMA synchronous = NORMAL");
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)");
parentPort.on("message", (message) => {
  if (message === "close") { db.close(); process.exit(0); }
  try {
    const r = checkpoint.get();
    parentPort.postMessage({ ok: true, busy: Number(r.busy), log: Number(r.log), checkpointed: Number(r.checkpointed) });
  } catch (error) {
    parentPort.postMessage({ ok: false, error: String((error && error.message) || error) });
  }
});
`;

export type CheckpointResult = { busy: number; log: number; checkpointed: number };
type WorkerMessage = ({ ok: true } & CheckpointResult) | { ok: false; error: string };

/** Checkpoints asked for (after writer commits, by the timer, or by checkpoint()) and done; the WAL's size at the last one. */
export type CheckpointerStats = {
  byCommits: number;
  byTimer: number;
  byCall: number;
  completed: number;
  lastLog: number;
  failed: string | null;
};

export class Checkpointer {
  private worker: Worker | null;
  private inFlight = false;
  private sinceRequest = 0;
  private dirty = false;
  private readonly timer: NodeJS.Timeout;
  /** Callers of checkpoint() answered by the checkpoint running now, and those waiting for the one after it. */
  private current: Array<(result: CheckpointResult | null) => void> = [];
  private next: Array<(result: CheckpointResult | null) => void> = [];
  readonly stats: CheckpointerStats = { byCommits: 0, byTimer: 0, byCall: 0, completed: 0, lastLog: 0, failed: null };

  /** `onFail` runs once, when the worker could not start or failed: the caller restores automatic checkpoints. */
  constructor(
    { file, timeoutMs }: { file: string; timeoutMs: number },
    private readonly onFail: (reason: string) => void,
  ) {
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, timeoutMs, cwd: process.cwd() } });
    this.worker.unref();
    this.worker.on("message", (message: WorkerMessage) => this.onMessage(message));
    this.worker.on("error", (error) => this.fail(`checkpoint worker failed: ${error instanceof Error ? error.message : String(error)}`));
    this.worker.on("exit", (code) => this.fail(`checkpoint worker exited (code ${code})`));
    this.timer = setInterval(() => {
      if (this.dirty) this.request("byTimer");
    }, CHECKPOINT_INTERVAL_MS);
    this.timer.unref();
  }

  /** Whether checkpoints are still being taken off the event loop. */
  get active(): boolean {
    return this.worker !== null;
  }

  /** The writer committed: every CHECKPOINT_EVERY_COMMITS commits, a checkpoint is asked for. */
  committed(): void {
    this.dirty = true;
    if (++this.sinceRequest >= CHECKPOINT_EVERY_COMMITS) this.request("byCommits");
  }

  /** Something was written (by any connection of this process): the next tick of the timer checkpoints it. */
  wrote(): void {
    this.dirty = true;
  }

  /** Checkpoint now (tests, shutdown): what a checkpoint started after this call did, or null if the worker is gone. */
  checkpoint(): Promise<CheckpointResult | null> {
    if (!this.worker) return Promise.resolve(null);
    return new Promise<CheckpointResult | null>((resolve) => {
      if (this.inFlight) this.next.push(resolve);
      else {
        this.current.push(resolve);
        this.request("byCall");
      }
    });
  }

  close(): void {
    const worker = this.worker;
    this.stop();
    if (worker) {
      worker.postMessage("close");
      // If it does not exit by itself (a checkpoint in progress), it is stopped; unref'd, it never holds the process.
      setTimeout(() => void worker.terminate(), 1000).unref();
    }
  }

  private request(by: "byCommits" | "byTimer" | "byCall"): void {
    if (!this.worker || this.inFlight) return; // one at a time; what arrives meanwhile is looked at when it ends
    this.inFlight = true;
    this.sinceRequest = 0;
    this.dirty = false;
    this.stats[by]++;
    this.worker.postMessage("checkpoint");
  }

  private onMessage(message: WorkerMessage): void {
    this.inFlight = false;
    if (!message.ok) {
      this.fail(`checkpoint failed: ${message.error}`);
      return;
    }
    this.stats.completed++;
    this.stats.lastLog = message.log;
    const { busy, log, checkpointed } = message;
    for (const resolve of this.current.splice(0)) resolve({ busy, log, checkpointed });
    if (this.next.length > 0) {
      this.current = this.next;
      this.next = [];
      this.request("byCall");
    } else if (this.sinceRequest >= CHECKPOINT_EVERY_COMMITS) this.request("byCommits");
  }

  /** The worker is gone (closed or failed): nothing more is asked of it, and every waiting caller gets null. */
  private stop(): void {
    this.worker = null;
    clearInterval(this.timer);
    for (const resolve of [...this.current.splice(0), ...this.next.splice(0)]) resolve(null);
  }

  private fail(reason: string): void {
    if (!this.worker) return;
    const worker = this.worker;
    this.stop();
    this.stats.failed = reason;
    void worker.terminate();
    this.onFail(reason);
  }
}
