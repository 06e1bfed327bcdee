import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { eq } from "drizzle-orm";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { describe, expect, it } from "vitest";
import { getDb } from "@/lib/db";
import { projectMcpServers } from "@/lib/db/schema";
import { saveProjectMcpServer } from "@/lib/projects/mcp-servers";
import { findStepEvents, listEvents } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { callMcpTool } from "@/lib/runs/steps/implement";
import { sandboxCapabilities } from "@/lib/sandbox";
import type { ImplementerState } from "@/lib/agents";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { expectRunConsistent, git, launch, makeRepo, processesRunning, until, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { repoWithNotesServer } from "./mcp-repo";
import { useScriptedWorkflow } from "./model-server";

/**
 * MCP servers as the implementer's tools, driven by the demo model's [mcp: <server>.<tool> {json}] marker: a real stdio
 * server written with the official SDK (tests/fixtures/mcp/notes-server.mjs, bundled into the repository) declared in
 * the repository's .mcp.json, started inside the run's sandbox and called; each call an event and a step of its own
 * (a re-run of a finished call's step does not call again); a denied tool refused; a repository server's tool behind a
 * policy gate by default.
 */

const t = useScriptedWorkflow();

async function mcpCalls(runId: string) {
  return (await listEvents({ runId, limit: 10_000 })).filter((e) => e.type === "MCP_TOOL_CALLED").map((e) => e.payload as { server: string; tool: string; arguments: string; result: string; isError: boolean });
}

describe("MCP tools", () => {
  it("a repository's stdio server runs in the run's sandbox and its tools are called, each call an event; a finished call's step re-run calls nothing", { timeout: 180_000 }, async () => {
    const repo = repoWithNotesServer();
    const project = await createProject({
      name: "mcp-stdio",
      ownerId: t.h.user.id,
      repository: { type: "local", path: repo },
      defaultConfig: { policy: { mcp: { "notes.*": "allow" } } },
    });
    const run = await launch(t.h.user, project.id, 'Use the notes server\n\n[mcp: notes.add {"a": 2, "b": 3}]\n[mcp: notes.where {"tag": "t1"}]', {
      trustMode: { planning: "auto", fixes: "manual" },
    });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const calls = await mcpCalls(run.id);
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({ server: "notes", tool: "add", arguments: '{"a":2,"b":3}', result: "sum=5", isError: false });
    // Inside bubblewrap the server's HOME is the sandbox's /tmp (the same environment as the run's commands).
    expect(calls[1]!.result).toMatch(sandboxCapabilities().isolated ? /^home=\/tmp calls=1 tag=t1 nonce=[0-9a-f-]{36}$/ : /^home=.* calls=1 tag=t1 nonce=/);
    expect(calls.every((c) => !c.isError)).toBe(true);
    await expectRunConsistent(run.id);

    // A restart after the call was recorded but before its step was memoized runs the step body again: it finds the
    // recorded call and gives the implementer that result, without calling the server a second time.
    const db = await getDb();
    let stepKey: string | null = null;
    for (let turn = 0; turn < 30 && !stepKey; turn++) {
      const key = `impl:1:turn:${turn}:mcp`;
      const events = await findStepEvents(db as unknown as Parameters<typeof findStepEvents>[0], run.id, key);
      if (events.some((e) => e.type === "MCP_TOOL_CALLED" && (e.payload as { tool: string }).tool === "where")) stepKey = key;
    }
    expect(stepKey).not.toBeNull();
    const pending = { toolCallId: "call-where", toolName: "mcp__notes__where", server: "notes", tool: "where", args: { tag: "t1" } };
    const state = { version: 1, messages: [], todos: [], pendingMcp: pending } as unknown as ImplementerState;
    const again = await callMcpTool({ runId: run.id, stepKey: stepKey!, state });
    expect(again.state.pendingMcp).toBeNull();
    // The recorded result, nonce and all: a second call would have answered with a new nonce.
    expect(again.state.messages).toMatchObject([{ role: "tool", content: [{ toolCallId: "call-where", output: { type: "text", value: calls[1]!.result } }] }]);
    expect(await mcpCalls(run.id)).toHaveLength(2);
  });

  it("one stdio server process per implementation session: its calls reach the process that listed the tools, and it ends with the run", { timeout: 180_000 }, async () => {
    const marker = `session-${Date.now()}`;
    const repo = repoWithNotesServer(marker);
    const project = await createProject({
      name: "mcp-session",
      ownerId: t.h.user.id,
      repository: { type: "local", path: repo },
      defaultConfig: { policy: { mcp: { "notes.*": "allow" } } },
    });
    const run = await launch(t.h.user, project.id, "Count twice\n\n[mcp: notes.count {}]\n[mcp: notes.count {}]", { trustMode: { planning: "auto", fixes: "manual" } });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    // The counter lives in the server's memory: the second call reached the same process as the first.
    expect((await mcpCalls(run.id)).map((c) => c.result)).toEqual(["count=1", "count=2"]);
    // Released with the run's sandbox: no server process is left.
    await until(async () => processesRunning(["node", ".tools/notes-server.mjs", marker]).length === 0 || null, "the session's server to end", 30_000);
  });

  it("a denied tool is refused and recorded; a repository server's tool waits at a policy gate (its own config cannot allow it), and runs once approved", { timeout: 180_000 }, async () => {
    const repo = repoWithNotesServer();
    // The repository tries to allow its own server's tools: ignored (a repository never sets policy.mcp).
    fs.mkdirSync(path.join(repo, ".autonomous"), { recursive: true });
    fs.writeFileSync(path.join(repo, ".autonomous", "config.json"), JSON.stringify({ policy: { mcp: { "notes.*": "allow" } } }));
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "allow my own tools");
    const project = await createProject({
      name: "mcp-policy",
      ownerId: t.h.user.id,
      repository: { type: "local", path: repo },
      defaultConfig: { policy: { mcp: { "notes.wipe": "deny" } } },
    });
    const run = await launch(t.h.user, project.id, 'Ask before adding\n\n[mcp: notes.wipe {}]\n[mcp: notes.add {"a": 1, "b": 1}]', {
      trustMode: { planning: "auto", fixes: "manual" },
    });
    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("policy");
    expect(gate.context).toMatchObject({ action: { tool: "mcp", summary: 'notes.add {"a":1,"b":1}' }, reason: expect.stringMatching(/declared by the repository/) });
    // Nothing ran before the decision.
    expect(await mcpCalls(run.id)).toEqual([]);
    await approveGate({ user: t.h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);

    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "POLICY_REFUSED").map((e) => e.payload)).toMatchObject([{ tool: "mcp", summary: "notes.wipe {}", reason: expect.stringMatching(/denied/) }]);
    expect(await mcpCalls(run.id)).toMatchObject([{ tool: "add", result: "sum=2", isError: false }]);
  });

  it("a project's remote server (owners' settings) is allowed by default and reached with its header, which is stored encrypted", { timeout: 180_000 }, async () => {
    const token = "mcp-header-token-7f3a9c";
    let authorized = 0;
    const server = http.createServer(async (req, res) => {
      if (req.headers["x-api-key"] !== token) {
        res.writeHead(401).end();
        return;
      }
      authorized += 1;
      const mcp = new McpServer({ name: "remote", version: "1.0.0" });
      mcp.registerTool("echo", { description: "Echo a text.", inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text: `echo:${text}` }] }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => void transport.close());
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
      const project = await createProject({ name: "mcp-remote", ownerId: t.h.user.id, repository: { type: "local", path: makeRepo() } });
      const view = await saveProjectMcpServer({ user: t.h.user, projectId: project.id, name: "remote", input: { server: { url, headers: { "x-api-key": token } } } });
      expect(view).toMatchObject({ name: "remote", config: { url }, headers: { "x-api-key": "set" } });
      expect(JSON.stringify(view)).not.toContain(token);
      const [row] = await (await getDb()).select().from(projectMcpServers).where(eq(projectMcpServers.projectId, project.id));
      expect(JSON.stringify(row)).not.toContain(token);

      const run = await launch(t.h.user, project.id, 'Echo through the project server\n\n[mcp: remote.echo {"text": "hello"}]', { trustMode: { planning: "auto", fixes: "manual" } });
      expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
      await waitForWorkflow(run.id);
      expect(await mcpCalls(run.id)).toMatchObject([{ server: "remote", tool: "echo", result: "echo:hello", isError: false }]);
      expect(authorized).toBeGreaterThan(0);
      const events = await listEvents({ runId: run.id, limit: 10_000 });
      expect(JSON.stringify(events)).not.toContain(token);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
