/**
 * The demo model's instruction syntax (DESIGN.md §6), parsed from the text of a run's request:
 *   ```file:<path>            → the implementer writes that file with that content
 *   [plan-ask: <question>]    → the planner asks that clarification before planning
 *   [ask: <q> | <opt> | <opt>] → the implementer asks once (single choice with options, free text without)
 *   [ask-multi: <q> | <opt> | …] → the implementer asks once as a multiple choice
 *   [ask-file: <q>]           → the implementer asks once for a file
 *   [run: <command line>]     → the implementer runs it with its run_command tool, once, in order (after its writes)
 *   [mcp: <server>.<tool> {json}] → the implementer calls that MCP tool with those arguments, once, in order (after
 *                               its [run:] commands)
 *   [check: <command line>]   → the planner adds it as an acceptance command
 *   [verify: <command line>]  → the planner adds it to the last task's own checks (per-task verification)
 *   ```fix:<path>             → after a failed per-task check, the implementer's fix pass writes that file
 *   [debug: <category>]       → the debug step classifies a failed check so (compile, test, environment, plan);
 *                               default test
 *   [replan: <observation>]   → the implementer's first call proposes a re-plan with that observation; the demo planner,
 *                               re-planning, adds a task R1 to handle it
 *   [scope: <path>]           → the planner adds that file or folder to the last task's files (the plan's scope)
 *   [fail-validation: N]      → the first N validations fail with a minor finding
 *   [invalid-mermaid: N]      → the planner's first N diagrams are invalid Mermaid
 *   [loop: 1]                 → the implementer's first session repeats one call (read_file README.md) until it is
 *                               stopped; a session started with feedback (a person's retry or re-plan) works normally
 */

import { withoutControls } from "@/lib/plain-text";

/** How the implementer asks a demo question (the request_clarification tool's response types). */
export type DemoAskType = "text" | "single_choice" | "multiple_choice" | "file";

export type DemoInstructions = {
  files: Array<{ path: string; content: string }>;
  planAsks: string[];
  /** In the order they appear in the request, whatever their marker. */
  asks: Array<{ question: string; options: string[]; responseType: DemoAskType }>;
  /** [run:] command lines, in order. */
  runs: string[];
  /** [mcp:] MCP tool calls, in order. */
  mcps: Array<{ server: string; tool: string; args: Record<string, unknown> }>;
  /** [check:] command lines, in order. */
  checks: string[];
  /** [verify:] command lines: the last task's own checks. */
  verifies: string[];
  /** ```fix:<path> blocks: written by the fix pass after a failed per-task check. */
  fixes: Array<{ path: string; content: string }>;
  /** [debug:] the debug step's category. */
  debug: string | null;
  /** [scope:] paths, added to the last task's files. */
  scope: string[];
  /** [replan:] the observation the implementer proposes a re-plan with, first thing. */
  replan: string | null;
  failValidation: number;
  invalidMermaid: number;
  /** [loop:] the implementer's first session loops (graduated intervention, then a person's decision). */
  loop: boolean;
  /** The request with markers and file blocks removed. */
  description: string;
  title: string;
  slug: string;
  notePath: string;
};

const FILE_BLOCK = /^(`{3,}|~{3,})[ \t]*file:([^\s`~]+)[^\n]*\n([\s\S]*?)^\1[ \t]*$/gm;
const FIX_BLOCK = /^(`{3,}|~{3,})[ \t]*fix:([^\s`~]+)[^\n]*\n([\s\S]*?)^\1[ \t]*$/gm;
const MARKER = /\[(plan-ask|ask|ask-multi|ask-file|fail-validation|invalid-mermaid|scope|replan|debug|loop):([^\]]*)\]/g;
/** A command may contain "]": its marker ends at the last "]" before the end of the line or the next marker. */
/** An MCP call's JSON arguments may hold "]": its marker ends at a "}]" before the end of the line or the next marker. */
const MCP_MARKER = /\[mcp:[ \t]*([A-Za-z0-9_-]+)\.([^\s{\]]+)[ \t]*(\{.*?\})?[ \t]*\][ \t]*(?=$|\[)/gm;
const COMMAND_MARKER = /\[(run|check|verify):[ \t]*(.*?)\][ \t]*(?=$|\[)/gm;

export function slugify(text: string): string {
  const slug = text
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  if (!slug) return "request";
  if (slug.length <= 48) return slug;
  const cut = slug.slice(0, 48);
  return cut.includes("-") ? cut.slice(0, cut.lastIndexOf("-")) : cut;
}

function count(value: string): number {
  const n = Number.parseInt(value.trim(), 10);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

export function parseInstructions(request: string): DemoInstructions {
  const files: DemoInstructions["files"] = [];
  const withoutFiles = request.replace(FILE_BLOCK, (_all, _fence: string, path: string, body: string) => {
    files.push({ path: path.trim(), content: body });
    return "";
  });
  const fixes: DemoInstructions["fixes"] = [];
  const withoutFixes = withoutFiles.replace(FIX_BLOCK, (_all, _fence: string, path: string, body: string) => {
    fixes.push({ path: path.trim(), content: body });
    return "";
  });
  const mcps: DemoInstructions["mcps"] = [];
  const withoutMcps = withoutFixes.replace(MCP_MARKER, (_all, server: string, tool: string, json: string | undefined) => {
    let args: Record<string, unknown> = {};
    try {
      const parsed: unknown = json ? JSON.parse(json) : {};
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
    } catch {
      args = {};
    }
    mcps.push({ server, tool, args });
    return "";
  });
  const runs: string[] = [];
  const checks: string[] = [];
  const verifies: string[] = [];
  const withoutCommands = withoutMcps.replace(COMMAND_MARKER, (_all, kind: string, line: string) => {
    if (line.trim()) (kind === "run" ? runs : kind === "verify" ? verifies : checks).push(line.trim());
    return "";
  });
  let debug: string | null = null;
  const planAsks: string[] = [];
  const asks: DemoInstructions["asks"] = [];
  const scope: string[] = [];
  let replan: string | null = null;
  let failValidation = 0;
  let invalidMermaid = 0;
  let loop = false;
  const description = withoutCommands
    .replace(MARKER, (_all, kind: string, body: string) => {
      if (kind === "plan-ask" && body.trim()) planAsks.push(body.trim());
      if (kind === "ask" || kind === "ask-multi") {
        const [question = "", ...rest] = body.split("|").map((s) => s.trim());
        const options = rest.filter(Boolean);
        const responseType = kind === "ask-multi" ? "multiple_choice" : options.length ? "single_choice" : "text";
        if (question) asks.push({ question, options, responseType });
      }
      if (kind === "ask-file" && body.trim()) asks.push({ question: body.trim(), options: [], responseType: "file" });
      if (kind === "scope" && body.trim()) scope.push(body.trim());
      if (kind === "replan" && body.trim()) replan = body.trim();
      if (kind === "debug" && body.trim()) debug = body.trim().toLowerCase();
      if (kind === "fail-validation") failValidation = count(body);
      if (kind === "invalid-mermaid") invalidMermaid = count(body);
      if (kind === "loop") loop = count(body) > 0;
      return "";
    })
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  const firstLine = description.split("\n").find((l) => l.trim()) ?? "";
  const title = withoutControls(firstLine.replace(/^#+\s*/, "")).trim().slice(0, 80) || "Request";
  const slug = slugify(title);
  return {
    files,
    planAsks,
    asks,
    runs,
    mcps,
    checks,
    verifies,
    fixes,
    debug,
    scope,
    replan,
    failValidation,
    invalidMermaid,
    loop,
    description: description || "(no description)",
    title,
    slug,
    notePath: `docs/requests/${slug}.md`,
  };
}
