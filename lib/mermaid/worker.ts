import { Worker } from "node:worker_threads";

/**
 * Mermaid's parser on a worker thread, with a time limit. Its grammar runs synchronously, and some inputs take it
 * far longer than their size suggests (12,000 `<b>` tags in one label: about a minute): on the request's thread that
 * stalled every other request of the server. Here the event loop stays free, and a parse that runs past the limit is
 * stopped by terminating the worker; the next parse starts a fresh one.
 *
 * One worker, reused: it loads jsdom and mermaid once and parses one small diagram of every supported kind before it
 * says it is ready (mermaid loads each kind's grammar on first use), so the limit measures parsing only. Parses are
 * handed over one at a time; each one's limit starts when the worker takes it.
 *
 * The worker sends back the parsed diagram's type and what the asked-for readers of mermaid's database returned,
 * as plain data (a Map as its entries): the database itself cannot cross threads.
 */

/** What a parse sent back: the diagram's type and reader results, or mermaid's refusal. */
export type WorkerParse =
  | { ok: true; type: string; data: Record<string, { map: Array<[unknown, unknown]> } | { value: unknown }> }
  | { ok: false; name?: string; message: string; hash?: unknown };

/** The parse ran past the time limit; the worker that ran it is gone. */
export class ParseTimeout extends Error {
  constructor(readonly limitMs: number) {
    super(`parsing took longer than ${limitMs / 1000} s`);
    this.name = "ParseTimeout";
  }
}

/** The worker could not load jsdom and mermaid (an unusual layout): the caller parses another way. */
export class WorkerUnavailable extends Error {
  constructor(reason: string) {
    super(`the Mermaid worker could not start: ${reason}`);
    this.name = "WorkerUnavailable";
  }
}

/** The worker, as CommonJS source: evaluated, so no bundler has to find or transform a file for it (as lib/db/checkpointer.ts). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { pathToFileURL } = require("node:url");
const resolve = (name) => require.resolve(name, { paths: [workerData.cwd] });
const plain = (value) => JSON.parse(JSON.stringify(value ?? null, (_key, v) => (v instanceof Map || v instanceof Set ? [...v] : v)));
async function load() {
  // mermaid's sanitiser binds to a window when it loads; a jsdom window is there for the import only.
  const { JSDOM } = require(resolve("jsdom"));
  const dom = new JSDOM("<!doctype html><html><body></body></html>");
  globalThis.window = dom.window;
  globalThis.document = dom.window.document;
  try {
    const mermaid = (await import(pathToFileURL(resolve("mermaid")).href)).default;
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
    return mermaid;
  } finally {
    delete globalThis.window;
    delete globalThis.document;
  }
}
load().then(async (mermaid) => {
  for (const text of workerData.warmUp) await mermaid.mermaidAPI.getDiagramFromText(text).catch(() => undefined);
  parentPort.on("message", async ({ text, readers }) => {
    try {
      const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
      const data = {};
      for (const reader of readers) {
        if (typeof diagram.db[reader] !== "function") continue;
        const value = diagram.db[reader]();
        data[reader] = value instanceof Map ? { map: plain([...value]) } : { value: plain(value) };
      }
      parentPort.postMessage({ ok: true, type: diagram.type, data });
    } catch (error) {
      let hash;
      try { hash = plain(error && error.hash); } catch {}
      parentPort.postMessage({ ok: false, name: error && error.name, message: String((error && error.message) || error), hash });
    }
  });
  parentPort.postMessage({ ready: true });
}, (error) => parentPort.postMessage({ failed: String((error && error.message) || error) }));
`;

/** One small diagram of each supported kind, parsed at start so their grammars are loaded before any limit runs. */
const WARM_UP = [
  "flowchart TD\n  A --> B",
  "sequenceDiagram\n  A->>B: hi",
  "classDiagram\n  class A",
  "erDiagram\n  A ||--o{ B : has",
  "stateDiagram-v2\n  [*] --> A",
];

type Job = {
  text: string;
  readers: readonly string[];
  resolve: (result: WorkerParse) => void;
  reject: (error: Error) => void;
};

export class MermaidWorker {
  private worker: Worker | null = null;
  private ready = false;
  private current: { job: Job; timer: NodeJS.Timeout } | null = null;
  private readonly queue: Job[] = [];
  /** Why the worker cannot start, once it failed to load: later parses are refused at once. */
  private unavailable: string | null = null;
  private starts = 0;

  constructor(private readonly options: { timeLimitMs: number; cwd?: string }) {}

  /** Parse `text` on the worker; rejects with ParseTimeout past the limit, WorkerUnavailable if it cannot start. */
  parse(text: string, readers: readonly string[]): Promise<WorkerParse> {
    if (this.unavailable) return Promise.reject(new WorkerUnavailable(this.unavailable));
    return new Promise<WorkerParse>((resolve, reject) => {
      this.queue.push({ text, readers, resolve, reject });
      this.next();
    });
  }

  get timeLimitMs(): number {
    return this.options.timeLimitMs;
  }

  /** Workers started so far: the first, and one after each parse that ran out of time or crashed it. */
  get started(): number {
    return this.starts;
  }

  /** Start the worker now (e.g. at server start), so the first parse does not wait for it to load. */
  warmUp(): void {
    if (!this.unavailable) this.spawn();
  }

  close(): void {
    const current = this.current;
    this.stop();
    for (const job of [...(current ? [current.job] : []), ...this.queue.splice(0)]) job.reject(new WorkerUnavailable("closed"));
  }

  private next(): void {
    if (!this.current && this.queue.length > 0) {
      if (!this.worker) this.spawn();
      if (this.ready) this.dispatch();
    }
    // Idle, the worker never holds the process open; while a parse waits on it (loading included), it does.
    this.refresh();
  }

  private dispatch(): void {
    const job = this.queue.shift()!;
    const timer = setTimeout(() => {
      // Terminated mid-parse: the worker's state is unknown, so it is not reused.
      this.current = null;
      this.stop();
      job.reject(new ParseTimeout(this.options.timeLimitMs));
      this.next();
    }, this.options.timeLimitMs);
    this.current = { job, timer };
    this.worker!.postMessage({ text: job.text, readers: job.readers });
  }

  private spawn(): void {
    if (this.worker) return;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { cwd: this.options.cwd ?? process.cwd(), warmUp: WARM_UP } });
    this.worker = worker;
    this.ready = false;
    this.starts++;
    worker.unref();
    worker.on("message", (message: WorkerParse | { ready: true } | { failed: string }) => {
      if (this.worker !== worker) return;
      if ("ready" in message) {
        this.ready = true;
        this.next();
      } else if ("failed" in message) {
        this.giveUp(message.failed);
      } else if (this.current) {
        const { job, timer } = this.current;
        clearTimeout(timer);
        this.current = null;
        job.resolve(message);
        this.next();
      }
    });
    worker.on("error", (error) => this.crashed(worker, error instanceof Error ? error.message : String(error)));
    worker.on("exit", (code) => this.crashed(worker, `exited with code ${code}`));
  }

  /** The worker died unasked: a parse in flight fails; a worker that never got ready is not started again. */
  private crashed(worker: Worker, reason: string): void {
    if (this.worker !== worker) return;
    if (!this.ready) return this.giveUp(reason);
    const current = this.current;
    this.current = null;
    this.stop();
    if (current) {
      clearTimeout(current.timer);
      current.job.reject(new Error(`the Mermaid worker stopped during a parse: ${reason}`));
    }
    this.next();
  }

  private giveUp(reason: string): void {
    this.unavailable = reason;
    this.stop();
    for (const job of this.queue.splice(0)) job.reject(new WorkerUnavailable(reason));
  }

  private stop(): void {
    const worker = this.worker;
    this.worker = null;
    this.ready = false;
    if (this.current) clearTimeout(this.current.timer);
    this.current = null;
    if (worker) void worker.terminate();
  }

  private refresh(): void {
    if (!this.worker) return;
    if (this.current || this.queue.length > 0) this.worker.ref();
    else this.worker.unref();
  }
}
