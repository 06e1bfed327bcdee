import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { resetEnvCache } from "@/lib/env";
import { callServerTool, listServerTools, withMcpClient } from "@/lib/agents/mcp/client";
import type { McpServer as McpServerConfig } from "@/lib/agents/mcp/config";
import type { Sandbox } from "@/lib/sandbox/types";

/**
 * A remote MCP server (streamable HTTP, the official SDK's server) on loopback: refused under the notification address
 * policy's default (no request reaches it), reached once private addresses are allowed (GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES).
 */

let server: http.Server;
let url: string;
let requests = 0;
const previous = process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES;

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    requests += 1;
    // Stateless: a server and transport per request, as the SDK's stateless example does.
    const mcp = new McpServer({ name: "remote", version: "1.0.0" });
    mcp.registerTool("echo", { description: "Echo a text.", inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text: `echo:${text}` }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => void transport.close());
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(() => {
  if (previous === undefined) delete process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES;
  else process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES = previous;
  resetEnvCache();
});

// A remote server needs no sandbox; the client never touches it.
const sandbox = { kind: "local" } as unknown as Sandbox;
const remote = (): McpServerConfig => ({ name: "remote", source: "project", type: "http", url, headers: {} });

describe("a remote MCP server", () => {
  it("on loopback is refused by default, before any request is sent", async () => {
    process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES = "deny";
    resetEnvCache();
    const before = requests;
    await expect(withMcpClient({ server: remote(), sandbox, timeoutMs: 5_000 }, (c, o) => listServerTools(c, "remote", o))).rejects.toThrow(
      /MCP server "remote" refused: 127\.0\.0\.1 is a loopback address.*GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES=allow/,
    );
    expect(requests).toBe(before);
  });

  it("is reached where the address policy allows it: its tools listed and called", async () => {
    process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES = "allow";
    resetEnvCache();
    const result = await withMcpClient({ server: remote(), sandbox, timeoutMs: 5_000 }, async (c, o) => ({
      tools: await listServerTools(c, "remote", o),
      call: await callServerTool(c, { tool: "echo", args: { text: "hi" } }, o),
    }));
    expect(result.tools.map((t) => t.tool)).toEqual(["echo"]);
    expect(result.call).toEqual({ text: "echo:hi", isError: false });
    expect(requests).toBeGreaterThan(0);
  });
});
