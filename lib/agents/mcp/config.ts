import { z } from "zod";

/*
 * MCP servers a run's implementer may use as tools, in the format the field converged on (Claude Code, Cursor, Copilot's
 * coding agent): `{"mcpServers": {"<name>": {"command", "args", "env"} | {"url", "headers"}}}`. They come from the
 * repository (`.mcp.json`, else `.autonomous/mcp.json`) and from the project's settings (its owner's). Where a server
 * came from decides its tools' default policy (lib/agents/mcp/policy.ts): a repository is hostile input.
 */

export const MCP_REPOSITORY_FILES = [".mcp.json", ".autonomous/mcp.json"] as const;

/** A server's name becomes part of tool names (`mcp__<server>__<tool>`) and of policy keys (`<server>.<tool>`). */
export const serverNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, "a server name is 1-32 letters, digits, _ or -");

export const stdioServerSchema = z.object({
  type: z.literal("stdio").optional(),
  command: z.string().trim().min(1, "must not be empty").max(500),
  args: z.array(z.string().max(2000)).max(100).default([]),
  /** Extra environment for the server (it runs in the sandbox, which drops anything naming or carrying a server secret). */
  env: z.record(z.string(), z.string().max(4000)).default({}),
  /** Working directory relative to the repository root. */
  cwd: z.string().max(500).optional(),
});

export const remoteServerSchema = z.object({
  type: z.enum(["http", "streamable-http", "sse"]).optional(),
  url: z
    .string()
    .url("must be a URL")
    .refine((u) => /^https?:/i.test(u), "must be an http(s) URL"),
  headers: z.record(z.string(), z.string().max(4000)).default({}),
});

export const serverSchema = z.union([stdioServerSchema, remoteServerSchema]);

export const mcpFileSchema = z.object({ mcpServers: z.record(serverNameSchema, serverSchema).default({}) });

export type McpSource = "repository" | "project";

export type McpServer =
  | { name: string; source: McpSource; type: "stdio"; command: string; args: string[]; env: Record<string, string>; cwd?: string }
  | { name: string; source: McpSource; type: "http" | "sse"; url: string; headers: Record<string, string> };

/** A tool a server offers, as listed once per implementation session and kept in the implementer's state. */
export type McpToolDef = { server: string; tool: string; description: string; inputSchema: Record<string, unknown> };

/** An MCP tool call the model made in a turn: the workflow runs it in a step of its own (a restart never repeats it). */
export type PendingMcpCall = { toolCallId: string; toolName: string; server: string; tool: string; args: Record<string, unknown> };

/** The servers of an `.mcp.json`'s parsed JSON, or an error message saying what is wrong (the file is then ignored). */
export function parseMcpServers(json: unknown, source: McpSource): { servers: McpServer[] } | { error: string } {
  const parsed = mcpFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { error: `${issue.path.join(".") || "(root)"}: ${issue.message}` };
  }
  return { servers: Object.entries(parsed.data.mcpServers).map(([name, s]) => toServer(name, s, source)) };
}

export function toServer(name: string, s: z.infer<typeof serverSchema>, source: McpSource): McpServer {
  if ("command" in s) return { name, source, type: "stdio", command: s.command, args: s.args, env: s.env, ...(s.cwd ? { cwd: s.cwd } : {}) };
  return { name, source, type: s.type === "sse" ? "sse" : "http", url: s.url, headers: s.headers };
}

/** The AI SDK tool name of an MCP tool: `mcp__<server>__<tool>`, within the 64 characters providers accept. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool.replace(/[^A-Za-z0-9_-]/g, "_")}`.slice(0, 64);
}
