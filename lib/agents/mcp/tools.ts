import { jsonSchema, tool, type ModelMessage, type Tool } from "ai";
import { redact } from "@/lib/redact";
import { holdFor, refuse, takeApproval, type ToolContext } from "../tools";
import { mcpToolName, type McpSource, type McpToolDef, type PendingMcpCall } from "./config";
import { mcpToolVerdict } from "./policy";

/*
 * The implementer's MCP tools: one AI SDK tool per tool its servers listed at the start of the session (kept in the
 * state, so a turn connects to nothing). A call is checked against the policy (allow, ask → a `policy` gate, deny →
 * refused and recorded), then NOT run inside the turn: the turn ends with it pending and the workflow runs it in a
 * durable step of its own (lib/runs/steps/mcp.ts), so a restart never repeats a finished call.
 */

/** What the implementer's state keeps of its MCP servers: their tools and where each server was declared. */
export type McpSession = { tools: McpToolDef[]; sources: Record<string, McpSource> };

/** The tool result standing in for a call that runs after the turn (replaced by its real result). */
export const MCP_PENDING = "__gatehouse_mcp_pending__";

function stable(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stable).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The arguments as a person and the events see them: redacted, capped. */
export function describeArgs(args: unknown, max = 500): string {
  const text = redact(stable(args ?? {}));
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

export function mcpTools(ctx: ToolContext, session: McpSession | undefined) {
  const out: Record<string, Tool<Record<string, unknown>, string>> = {};
  for (const def of session?.tools ?? []) {
    const name = mcpToolName(def.server, def.tool);
    const source = session!.sources[def.server] ?? "repository";
    out[name] = tool<Record<string, unknown>, string>({
      description: `[MCP server "${def.server}" (${source === "repository" ? "declared by the repository" : "declared by the project"})] ${def.description}`.trim(),
      inputSchema: jsonSchema<Record<string, unknown>>({ type: "object", ...def.inputSchema } as Parameters<typeof jsonSchema>[0]),
      execute: async (input, { toolCallId }) => {
        const args = input && typeof input === "object" ? input : {};
        const summary = `${def.server}.${def.tool} ${describeArgs(args)}`;
        const verdict = mcpToolVerdict({ server: def.server, tool: def.tool, source, rules: ctx.policy?.mcp });
        if (verdict === "deny") {
          throw refuse(ctx, { tool: "mcp", summary, reason: `The MCP tool ${def.server}.${def.tool} is denied by this project's policy (policy.mcp).` });
        }
        if (ctx.pendingMcp) throw new Error("Not run: one MCP tool call per turn. Call it again in your next turn.");
        if (ctx.hold) throw new Error("Not run: another action of this turn waits for a person. Call it again after the decision.");
        if (verdict === "ask") {
          const action = {
            tool: "mcp" as const,
            summary,
            reason: `The MCP tool ${def.server}.${def.tool} needs a person's approval (${source === "repository" ? "its server is declared by the repository" : "policy.mcp says ask"}).`,
            fingerprint: `mcp:${def.server}.${def.tool}:${stable(args)}`,
          };
          if (!takeApproval(ctx, action)) return holdFor(ctx, action);
        }
        ctx.pendingMcp = { toolCallId, toolName: name, server: def.server, tool: def.tool, args } satisfies PendingMcpCall;
        return MCP_PENDING;
      },
    });
  }
  return out;
}

/**
 * After the turn: the pending call's placeholder result is taken out of the new messages (its real result comes from
 * the step). When the turn also ended on a held action or a command left running, the call does not run: its result
 * says so, and the model calls it again later.
 */
export function settleMcpCall(messages: ModelMessage[], ctx: ToolContext, otherwise: boolean): { messages: ModelMessage[]; pending: PendingMcpCall | null } {
  const pending = ctx.pendingMcp ?? null;
  if (!pending) return { messages, pending: null };
  const out = messages.flatMap((m): ModelMessage[] => {
    if (m.role !== "tool") return [m];
    const content = m.content.flatMap((p) => {
      if (!(p.type === "tool-result" && p.toolCallId === pending.toolCallId)) return [p];
      if (!otherwise) return [];
      return [{ ...p, output: { type: "error-text" as const, value: "Not run: another action of this turn must be settled first. Call it again after." } }];
    });
    return content.length ? [{ ...m, content }] : [];
  });
  return { messages: out, pending: otherwise ? null : pending };
}

/** The call's result (from its step) joins the conversation as the tool's result; nothing is pending any more. */
export function applyMcpResult<S extends { messages: ModelMessage[]; pendingMcp?: PendingMcpCall | null }>(
  state: S,
  call: PendingMcpCall,
  result: { text: string; isError: boolean },
): S {
  const output = result.isError ? { type: "error-text" as const, value: result.text || "The MCP tool failed." } : { type: "text" as const, value: result.text };
  const message: ModelMessage = { role: "tool", content: [{ type: "tool-result", toolCallId: call.toolCallId, toolName: call.toolName, output }] };
  return { ...state, pendingMcp: null, messages: [...state.messages, message] };
}
