import { singleLine } from "@/lib/plain-text";

/**
 * A run's short title, derived from its request: the first line that says something, without Markdown syntax or demo
 * markers ([ask: …], [run: …]), cut at a word boundary. The request itself stays whole (rendered as Markdown on the
 * run page); lists and headings show this.
 */
export const RUN_TITLE_MAX = 80;

const MARKER = /\[(?:plan-ask|ask-multi|ask-file|ask|run|check|fail-validation|invalid-mermaid):[^\]]*\]/g;

export function runTitle(request: string, max: number = RUN_TITLE_MAX): string {
  let inFence = false;
  for (const raw of request.split("\n")) {
    const line = raw.trim();
    if (/^(```|~~~)/.test(line)) {
      inFence = !inFence;
      continue;
    }
    if (inFence) continue;
    const text = plain(line);
    if (text) return cut(text, max);
  }
  return "Untitled run";
}

/** One line of Markdown as plain text. */
function plain(line: string): string {
  // Control characters first: a title is shown in terminals and pages, and "\x1b[2J" must not clear a screen.
  return singleLine(line)
    .replace(MARKER, " ")
    .replace(/^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+/, "")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/(\*\*|__|\*|_|`)(.+?)\1/g, "$2")
    .replace(/\s+/g, " ")
    .trim();
}

function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = text.slice(0, max - 1);
  const space = head.lastIndexOf(" ");
  return `${(space > max / 2 ? head.slice(0, space) : head).replace(/[\s,;:.-]+$/, "")}…`;
}
