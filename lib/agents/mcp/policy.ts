import type { McpSource } from "./config";

/*
 * The policy on MCP tools (run config `policy.mcp`): per `<server>.<tool>` or `<server>.*`, "allow", "ask" (a `policy`
 * gate before each call, as a risky command) or "deny". Unset: a repository-declared server's tools ask (its `.mcp.json`
 * is repository content, hostile input), a project-declared server's (its owner's) are allowed. The repository's
 * `.autonomous/config.json` cannot set `policy.mcp` (lib/runs/service.ts drops it), so a repository never widens it.
 */

export type McpVerdict = "allow" | "ask" | "deny";
export const MCP_VERDICTS = ["allow", "ask", "deny"] as const;

export function mcpToolVerdict({ server, tool, source, rules = {} }: { server: string; tool: string; source: McpSource; rules?: Record<string, McpVerdict> }): McpVerdict {
  return rules[`${server}.${tool}`] ?? rules[`${server}.*`] ?? (source === "repository" ? "ask" : "allow");
}

const RANK: Record<McpVerdict, number> = { allow: 0, ask: 1, deny: 2 };

/** The stricter of two verdicts (the owner's floor and a run's own). */
export function stricter(a: McpVerdict | undefined, b: McpVerdict | undefined): McpVerdict | undefined {
  if (!a) return b;
  if (!b) return a;
  return RANK[a] >= RANK[b] ? a : b;
}
