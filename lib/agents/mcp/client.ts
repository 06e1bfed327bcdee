import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { assertReachableHost, literalHostProblem } from "@/lib/address-policy";
import type { Sandbox } from "@/lib/sandbox/types";
import type { McpServer, McpToolDef } from "./config";
import { SandboxStdioTransport } from "./sandbox-transport";

/*
 * MCP servers reached through the official SDK's client. A stdio server runs INSIDE the run's sandbox: locally its
 * program line from Sandbox.stdioLine (bubblewrap, limits, no network unless the sandbox has it); in E2B a background
 * command whose stdin and stdout the E2B API carries (Sandbox.stdioProcess, under the E2B sandbox's network rule). A
 * remote server is reached only at an address the notification address policy allows (public unicast, or private ones
 * with GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES=allow), checked just before connecting, with no redirects followed (a
 * redirect could lead anywhere).
 */

/** What is kept of a server's tool list and of one tool's description and input schema. */
export const MCP_LIMITS = { toolsPerServer: 40, descriptionChars: 1_000, schemaChars: 8_000, resultChars: 16_000, argumentChars: 4_000 };

export class McpUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "McpUnavailableError";
  }
}

async function transportFor(server: McpServer, sandbox: Sandbox, lifetimeMs: number): Promise<{ transport: Transport; release: () => Promise<void> }> {
  if (server.type === "stdio") {
    if (sandbox.stdioProcess) {
      // A remote sandbox (E2B): the process lives there, its stdio carried by the sandbox's API; it is killed at
      // close, and by the sandbox after its lifetime whatever happens.
      const process = sandbox as Sandbox & Required<Pick<Sandbox, "stdioProcess">>;
      const line = { command: server.command, args: server.args, cwd: server.cwd, env: server.env, timeoutMs: lifetimeMs };
      return { transport: new SandboxStdioTransport(process, line), release: async () => {} };
    }
    if (!sandbox.stdioLine) throw new McpUnavailableError(`MCP server "${server.name}" is a stdio server, and this run's sandbox (${sandbox.kind}) cannot run one.`);
    const line = await sandbox.stdioLine(server.command, server.args, { cwd: server.cwd, env: server.env });
    const transport = new StdioClientTransport({ command: line.file, args: line.args, cwd: line.cwd, env: line.env, stderr: "ignore" });
    return { transport, release: line.release };
  }
  let url: URL;
  try {
    url = new URL(server.url);
  } catch {
    throw new McpUnavailableError(`MCP server "${server.name}": ${server.url} is not a URL.`);
  }
  const literal = literalHostProblem(url.hostname);
  if (literal) throw new McpUnavailableError(`MCP server "${server.name}" refused: ${literal}.`);
  try {
    await assertReachableHost(url.hostname);
  } catch (error) {
    throw new McpUnavailableError(`MCP server "${server.name}" refused: ${(error as Error).message}.`);
  }
  const noRedirects = (input: string | URL, init?: RequestInit) => fetch(input, { ...init, redirect: "error" });
  const requestInit = { headers: server.headers };
  const transport =
    server.type === "sse"
      ? new SSEClientTransport(url, { requestInit, fetch: noRedirects })
      : new StreamableHTTPClientTransport(url, { requestInit, fetch: noRedirects });
  return { transport, release: async () => {} };
}

/**
 * A connected client and how to close it (the client, then what the server's process set up). `lifetimeMs` bounds a
 * stdio server's process in a remote sandbox (E2B kills it then); by default the call's timeout plus 30 s.
 */
export async function openMcpClient({
  server,
  sandbox,
  timeoutMs,
  lifetimeMs,
  signal,
}: {
  server: McpServer;
  sandbox: Sandbox;
  timeoutMs: number;
  lifetimeMs?: number;
  signal?: AbortSignal;
}): Promise<{ client: Client; close: () => Promise<void> }> {
  const { transport, release } = await transportFor(server, sandbox, lifetimeMs ?? timeoutMs + 30_000);
  const client = new Client({ name: "gatehouse", version: "1.0.0" });
  const close = async () => {
    await client.close().catch(() => null);
    await release().catch(() => null);
  };
  try {
    await client.connect(transport, { timeout: timeoutMs, ...(signal ? { signal } : {}) });
  } catch (error) {
    await close();
    throw error;
  }
  return { client, close };
}

/** Connect to a server, run `fn` with the client, and close it (and the sandboxed process) whatever happens. */
export async function withMcpClient<T>(
  { server, sandbox, timeoutMs, signal }: { server: McpServer; sandbox: Sandbox; timeoutMs: number; signal?: AbortSignal },
  fn: (client: Client, options: { timeout: number; signal?: AbortSignal }) => Promise<T>,
): Promise<T> {
  const { client, close } = await openMcpClient({ server, sandbox, timeoutMs, signal });
  try {
    return await fn(client, { timeout: timeoutMs, ...(signal ? { signal } : {}) });
  } finally {
    await close();
  }
}

function capped(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}\n[… cut: ${text.length - max} more characters]`;
}

/** A server's tools, bounded (MCP_LIMITS). */
export async function listServerTools(client: Client, server: string, options: { timeout: number; signal?: AbortSignal }): Promise<McpToolDef[]> {
  const listed = await client.listTools(undefined, options);
  return listed.tools.slice(0, MCP_LIMITS.toolsPerServer).map((t) => {
    const schema = JSON.stringify(t.inputSchema ?? {});
    return {
      server,
      tool: t.name,
      description: capped(t.description ?? "", MCP_LIMITS.descriptionChars),
      inputSchema: schema.length <= MCP_LIMITS.schemaChars ? (t.inputSchema as Record<string, unknown>) : { type: "object" },
    };
  });
}

/** One tool call: its result as text (text parts joined, other parts named), capped, and whether it failed. */
export async function callServerTool(
  client: Client,
  { tool, args }: { tool: string; args: Record<string, unknown> },
  options: { timeout: number; signal?: AbortSignal },
): Promise<{ text: string; isError: boolean }> {
  const result = (await client.callTool({ name: tool, arguments: args }, undefined, options)) as {
    content?: Array<{ type: string; text?: string }>;
    structuredContent?: unknown;
    isError?: boolean;
  };
  const parts = (result.content ?? []).map((c) => (c.type === "text" ? (c.text ?? "") : `[${c.type} content]`));
  if (!parts.length && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
  return { text: capped(parts.join("\n"), MCP_LIMITS.resultChars), isError: result.isError === true };
}
