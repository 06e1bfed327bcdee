import { log } from "@/lib/log";
import { MermaidError, MermaidTooComplexError } from "./errors";
import { checkDiagramLimits, DIAGRAM_LIMITS } from "./limits";
import { MermaidWorker, ParseTimeout, WorkerUnavailable, type WorkerParse } from "./worker";

/**
 * Mermaid's own grammar, run in Node, on a worker thread with a time limit (./worker.ts), after the text passed the
 * limits of ./limits.ts. If the worker cannot start (it loads jsdom and mermaid from the working directory, which an
 * unusual layout may not have), diagrams are parsed here instead, warned once: the limits still hold, the time limit
 * does not. That path is also what keeps mermaid and jsdom in the traced server output (`next build`, standalone),
 * which the worker's evaluated source does not name.
 *
 * In this thread, mermaid's sanitiser (DOMPurify) binds to a `window` when the module loads, so a jsdom window is
 * installed for the import only and removed again: server code elsewhere must not think it runs in a browser.
 */

export const SUPPORTED_DIAGRAMS = ["flowchart", "sequence", "class", "er", "state"] as const;
export type DiagramKind = (typeof SUPPORTED_DIAGRAMS)[number];

type MermaidDiagram = { type: string; db: unknown };
type MermaidInstance = {
  initialize(config: Record<string, unknown>): void;
  mermaidAPI: { getDiagramFromText(text: string): Promise<MermaidDiagram> };
};

/** The database readers the extractions use (./constraints.ts, ./plan-diagram.ts): what the worker sends back. */
const DB_READERS = [
  "getVertices",
  "getEdges",
  "getSubGraphs",
  "getActors",
  "getMessages",
  "getClasses",
  "getRelations",
  "getEntities",
  "getRelationships",
  "getStates",
] as const;

const globalForWorker = globalThis as unknown as { __gatehouseMermaidWorker?: MermaidWorker };

/**
 * The process's parser worker, created on first use: cached on globalThis, so hot reload does not start one per edit,
 * and replaced if the time limit it was made with is no longer the one in force.
 */
function parserWorker(): MermaidWorker {
  const cached = globalForWorker.__gatehouseMermaidWorker;
  if (cached?.timeLimitMs === DIAGRAM_LIMITS.parseMs) return cached;
  cached?.close();
  globalForWorker.__gatehouseMermaidWorker = new MermaidWorker({ timeLimitMs: DIAGRAM_LIMITS.parseMs });
  return globalForWorker.__gatehouseMermaidWorker;
}

const globalForMermaid = globalThis as unknown as { __gatehouseMermaid?: Promise<MermaidInstance> };

async function loadMermaid(): Promise<MermaidInstance> {
  const g = globalThis as Record<string, unknown>;
  const installed: string[] = [];
  if (typeof g.window === "undefined") {
    const { JSDOM } = await import("jsdom");
    const dom = new JSDOM("<!doctype html><html><body></body></html>");
    g.window = dom.window;
    g.document = dom.window.document;
    installed.push("window", "document");
  }
  try {
    const mod = (await import("mermaid")) as unknown as { default: MermaidInstance };
    const mermaid = mod.default;
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
    return mermaid;
  } finally {
    for (const key of installed) delete g[key];
  }
}

function getMermaid(): Promise<MermaidInstance> {
  globalForMermaid.__gatehouseMermaid ??= loadMermaid();
  globalForMermaid.__gatehouseMermaid.catch(() => {
    globalForMermaid.__gatehouseMermaid = undefined;
  });
  return globalForMermaid.__gatehouseMermaid;
}

/** Start the parser worker ahead of the first plan (e.g. at server start) so no request waits for it to load. */
export function warmUpMermaid(): void {
  parserWorker().warmUp();
}

// mermaid keeps one database per diagram type; parses are serialised so an extraction never reads another parse's data.
let queue: Promise<unknown> = Promise.resolve();
function serialized<T>(fn: () => Promise<T>): Promise<T> {
  const run = queue.then(fn, fn);
  queue = run.catch(() => undefined);
  return run;
}

/** Strip a surrounding ```mermaid fence, which models often add. */
export function stripFence(text: string): string {
  const match = /^\s*```(?:mermaid)?[^\n]*\n([\s\S]*?)\n?```\s*$/.exec(text);
  return (match ? match[1]! : text).trim();
}

function kindOf(type: string): DiagramKind | undefined {
  if (type.startsWith("flowchart") || type === "graph") return "flowchart";
  if (type === "sequence") return "sequence";
  if (type.startsWith("class")) return "class";
  if (type === "er") return "er";
  if (type.startsWith("state")) return "state";
  return undefined;
}

function lineOf(error: unknown): number | undefined {
  const hash = (error as { hash?: { loc?: { first_line?: number }; line?: number } }).hash;
  if (hash?.loc?.first_line) return hash.loc.first_line;
  if (typeof hash?.line === "number") return hash.line + 1;
  const m = /on line (\d+)/.exec(String((error as Error)?.message ?? ""));
  return m ? Number(m[1]) : undefined;
}

/** A refusal of mermaid's, thrown or sent back by the worker, as a MermaidError with the line. */
function refusal(text: string, error: { name?: string; message: string; hash?: unknown }): MermaidError {
  if (error.name === "UnknownDiagramError" || /No diagram type detected/.test(error.message)) {
    return new MermaidError(
      `Unknown diagram type "${text.split("\n")[0]!.trim().slice(0, 60)}". Start with one of: flowchart TD, sequenceDiagram, classDiagram, erDiagram, stateDiagram-v2.`,
      1,
    );
  }
  return new MermaidError(error.message.replace(/\s+$/, ""), lineOf(error));
}

function readDiagram<T>(type: string, db: unknown, read: (parsed: { kind: DiagramKind; type: string; db: unknown }) => T): T {
  const kind = kindOf(type);
  if (!kind) {
    throw new MermaidError(`Diagram type "${type}" is not supported; use a flowchart, sequence, class, ER or state diagram.`, 1);
  }
  return read({ kind, type, db });
}

/** The worker's reader results as a database again: each reader returns what it returned there (a Map as a Map). */
function databaseOf(data: Extract<WorkerParse, { ok: true }>["data"]): Record<string, () => unknown> {
  return Object.fromEntries(Object.entries(data).map(([reader, v]) => [reader, () => ("map" in v ? new Map(v.map) : v.value)]));
}

let warnedUnavailable = false;

/** The fallback when the worker cannot start: mermaid in this thread, one parse at a time. */
async function parseHere<T>(text: string, read: (parsed: { kind: DiagramKind; type: string; db: unknown }) => T): Promise<T> {
  const mermaid = await getMermaid();
  return serialized(async () => {
    let diagram: MermaidDiagram;
    try {
      diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
    } catch (error) {
      throw refusal(text, { name: (error as Error)?.name, message: error instanceof Error ? error.message : String(error), hash: (error as { hash?: unknown })?.hash });
    }
    return readDiagram(diagram.type, diagram.db, read);
  });
}

/**
 * Parse a diagram with mermaid's grammar and hand what its database holds to `read` (the readers of DB_READERS).
 * Throws MermaidError (with the line) for anything mermaid refuses or a diagram type Gatehouse does not support, and
 * MermaidTooComplexError (a 422) for a diagram over the limits or whose parse ran out of time.
 */
export async function withParsedDiagram<T>(
  source: string,
  read: (parsed: { kind: DiagramKind; type: string; db: unknown }) => T,
): Promise<T> {
  const text = stripFence(source);
  if (!text) throw new MermaidError("The diagram is empty.", 1);
  checkDiagramLimits(text);
  let parsed: WorkerParse;
  try {
    parsed = await parserWorker().parse(text, DB_READERS);
  } catch (error) {
    if (error instanceof ParseTimeout) throw new MermaidTooComplexError(`${error.message}. Simplify it or split it.`);
    if (!(error instanceof WorkerUnavailable)) throw error;
    if (!warnedUnavailable) {
      warnedUnavailable = true;
      log.warn("Mermaid diagrams are parsed on the request's thread, without a time limit", { reason: error.message });
    }
    return parseHere(text, read);
  }
  if (!parsed.ok) throw refusal(text, parsed);
  return readDiagram(parsed.type, databaseOf(parsed.data), read);
}
