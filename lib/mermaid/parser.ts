import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";

/**
 * Mermaid's own grammar, run in Node. mermaid's sanitiser (DOMPurify) binds to a `window` when the module loads, so a
 * jsdom window is installed for the import only and removed again: server code elsewhere must not think it runs in a
 * browser. The loaded instance is cached, so only the first call pays the ~0.5 s start-up.
 */

export const SUPPORTED_DIAGRAMS = ["flowchart", "sequence", "class", "er", "state"] as const;
export type DiagramKind = (typeof SUPPORTED_DIAGRAMS)[number];

type MermaidDiagram = { type: string; db: unknown };
type MermaidInstance = {
  initialize(config: Record<string, unknown>): void;
  mermaidAPI: { getDiagramFromText(text: string): Promise<MermaidDiagram> };
};

/** A diagram mermaid refused; `line` is 1-based within the diagram text. */
export class MermaidError extends AppError {
  readonly line: number | undefined;
  readonly parserMessage: string;
  constructor(message: string, line?: number) {
    // The parser quotes the offending text, which may be a secret someone pasted: redacted before anyone sees it.
    const parserMessage = redact(message);
    const said = plainParserMessage(parserMessage);
    super("bad_request:mermaid", line ? `Invalid Mermaid on line ${line}: ${said}` : `Invalid Mermaid: ${said}`, {
      details: { line, parserMessage },
    });
    this.line = line;
    this.parserMessage = parserMessage;
  }
}

/**
 * The parser's message without its own "Parse error on line N:" header and source excerpt: its line count differs from
 * the diagram's (it is reported once, by us), and the excerpt has the newlines removed.
 */
export function plainParserMessage(raw: string): string {
  const lines = raw.split("\n");
  if (!/^Parse error on line \d+:?\s*$/.test(lines[0] ?? "")) return raw;
  const expecting = lines.find((l) => /^Expecting /.test(l));
  const said = expecting ?? lines.slice(1).filter((l) => !/^-*\^$/.test(l) && !l.startsWith("...")).join(" ");
  return (said.trim() || "the parser could not read it").replace(/got 'EOF'$/, "got the end of the diagram");
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

/** Load mermaid ahead of the first plan (e.g. at server start) so no request pays the cold start. */
export async function warmUpMermaid(): Promise<void> {
  await getMermaid();
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

/**
 * Parse a diagram with mermaid's grammar and hand its populated database to `read` while no other parse can touch it.
 * Throws MermaidError (with the line) for anything mermaid refuses or a diagram type Gatehouse does not support.
 */
export async function withParsedDiagram<T>(
  source: string,
  read: (parsed: { kind: DiagramKind; type: string; db: unknown }) => T,
): Promise<T> {
  const text = stripFence(source);
  if (!text) throw new MermaidError("The diagram is empty.", 1);
  const mermaid = await getMermaid();
  return serialized(async () => {
    let diagram: MermaidDiagram;
    try {
      diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
    } catch (error) {
      const raw = error instanceof Error ? error.message : String(error);
      if ((error as Error)?.name === "UnknownDiagramError" || /No diagram type detected/.test(raw)) {
        throw new MermaidError(
          `Unknown diagram type "${text.split("\n")[0]!.trim().slice(0, 60)}". Start with one of: flowchart TD, sequenceDiagram, classDiagram, erDiagram, stateDiagram-v2.`,
          1,
        );
      }
      throw new MermaidError(raw.replace(/\s+$/, ""), lineOf(error));
    }
    const kind = kindOf(diagram.type);
    if (!kind) {
      throw new MermaidError(
        `Diagram type "${diagram.type}" is not supported; use a flowchart, sequence, class, ER or state diagram.`,
        1,
      );
    }
    return read({ kind, type: diagram.type, db: diagram.db });
  });
}
