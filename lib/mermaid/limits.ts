import { MermaidTooComplexError } from "./errors";

/**
 * How large a diagram Gatehouse parses. Mermaid's grammar is slow on some inputs out of all proportion to their size
 * (12,000 `<b>` tags in a label: about a minute; 3,000 nested subgraphs: 9 s), so these are checked, with a plain
 * scan of the text, before any parse, far above what a plan needs (a plan of 40 tasks is about 60 lines and 4 KB, with
 * a few tags and subgraphs). What gets past them still parses on a worker thread with a time limit (./worker.ts).
 * Documented in the README (Mermaid limits).
 */
export const DIAGRAM_LIMITS = {
  /** Characters of the diagram text. */
  chars: 50_000,
  /** Lines of the diagram text. */
  lines: 1_000,
  /** HTML tags (`<b>`, `<br>`, `</i>` …) in all labels together. */
  htmlTags: 500,
  /** `subgraph` blocks, nested or not. */
  subgraphs: 100,
  /** How long one parse may take on the worker (a plan of 40 tasks: well under a second, even on a busy machine). */
  parseMs: 10_000,
} as const;

const HTML_TAG = /<\/?[A-Za-z][^<>]*>/g;
/** The keyword anywhere: statements may share a line (`;`). A label with the word in it counts too, which is harmless. */
const SUBGRAPH = /\bsubgraph\b/g;

function count(text: string, pattern: RegExp): number {
  let n = 0;
  pattern.lastIndex = 0;
  while (pattern.exec(text)) n++;
  return n;
}

/** Throws MermaidTooComplexError naming the first limit the text is over. */
export function checkDiagramLimits(text: string): void {
  const over = (what: string, found: number, limit: number) =>
    new MermaidTooComplexError(`it has ${found.toLocaleString("en")} ${what}; at most ${limit.toLocaleString("en")} are parsed. Simplify it or split it.`);
  const lines = count(text, /\n/g) + 1;
  if (lines > DIAGRAM_LIMITS.lines) throw over("lines", lines, DIAGRAM_LIMITS.lines);
  const tags = count(text, HTML_TAG);
  if (tags > DIAGRAM_LIMITS.htmlTags) throw over("HTML tags", tags, DIAGRAM_LIMITS.htmlTags);
  const subgraphs = count(text, SUBGRAPH);
  if (subgraphs > DIAGRAM_LIMITS.subgraphs) throw over("subgraphs", subgraphs, DIAGRAM_LIMITS.subgraphs);
  if (text.length > DIAGRAM_LIMITS.chars) throw over("characters", text.length, DIAGRAM_LIMITS.chars);
}
