/**
 * Diagram labels may carry HTML (mermaid renders `<b>`, `<br>` …). Mermaid's own sanitizer keeps `<img src=…>`, and a
 * browser fetches such an image with a Referer: a plan or a run title could make every viewer call an outside server.
 * Before a diagram is stored, tags that load or link anything are dropped, external URLs become plain text, and
 * `click`/`href` interactions (which open URLs or call functions) are removed. The Content-Security-Policy
 * (img-src 'self' data:) is the second line of defence.
 */
const LOADING_TAGS = /<\/?(?:img|image|a|iframe|frame|object|embed|video|audio|source|track|link|script|style|svg|use|form|input|base|meta)\b[^>]*>/gi;
const URL_ATTRIBUTE = /\s(?:src|href|xlink:href|srcset|action|formaction|background|poster|style)\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)/gi;
const EXTERNAL_URL = /\b(?:(?:https?|ftp|wss?|file):\/\/|(?:javascript|vbscript):|data:[\w.+-]+\/[\w.+-]+)[^\s"'<>`|)\]}]*/gi;
const PROTOCOL_RELATIVE = /(^|[\s("'=])\/\/[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'<>`|)\]}]*/g;
const INTERACTION_LINE = /^\s*(?:click|href|callback)\s+\S.*$/gim;

export function sanitizeDiagram(source: string): string {
  let out = source.replace(INTERACTION_LINE, "");
  // Repeat until stable: a removed tag must not join the remains of two others into a new one.
  for (let i = 0; i < 5; i++) {
    const next = out.replace(LOADING_TAGS, "").replace(URL_ATTRIBUTE, "");
    if (next === out) break;
    out = next;
  }
  out = out.replace(EXTERNAL_URL, "[link removed]").replace(PROTOCOL_RELATIVE, "$1[link removed]");
  return out;
}

/** True when a diagram would lose something to sanitizeDiagram (for tests and warnings). */
export function hasExternalContent(source: string): boolean {
  return sanitizeDiagram(source) !== source;
}
