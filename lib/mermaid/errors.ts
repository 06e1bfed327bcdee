import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";

/** A diagram mermaid refused; `line` is 1-based within the diagram text. */
export class MermaidError extends AppError {
  readonly line: number | undefined;
  readonly parserMessage: string;
  constructor(message: string, line?: number, { code = "bad_request:mermaid", heading = "Invalid Mermaid" }: { code?: "bad_request:mermaid" | "unprocessable:mermaid"; heading?: string } = {}) {
    // The parser quotes the offending text, which may be a secret someone pasted: redacted before anyone sees it.
    const parserMessage = redact(message);
    const said = plainParserMessage(parserMessage);
    super(code, line ? `${heading} on line ${line}: ${said}` : `${heading}: ${said}`, {
      details: { line, parserMessage },
    });
    this.line = line;
    this.parserMessage = parserMessage;
  }
}

/**
 * A diagram over one of the limits of lib/mermaid/limits.ts, or whose parse ran out of time: a 422 for the API and
 * edited plans. It is a MermaidError, so the planner treats it as an invalid diagram (one retry with the message,
 * then a pause for a person).
 */
export class MermaidTooComplexError extends MermaidError {
  constructor(reason: string) {
    super(reason, undefined, { code: "unprocessable:mermaid", heading: "Diagram too complex" });
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
