import { getDb } from "@/lib/db";
import { findStepEvents } from "@/lib/db/event-store";
import { redact, redactDeep } from "@/lib/redact";
import type { ImplementerState } from "@/lib/agents";
import { MCP_REPOSITORY_FILES, parseMcpServers, type McpServer, type McpToolDef } from "@/lib/agents/mcp/config";
import { callServerTool, listServerTools, MCP_LIMITS } from "@/lib/agents/mcp/client";
import { closeSessionServers, withSessionMcpClient } from "@/lib/agents/mcp/pool";
import { applyMcpResult, describeArgs, type McpSession } from "@/lib/agents/mcp/tools";
import { readFileAt } from "@/lib/git";
import { log } from "@/lib/log";
import { projectMcpServersOf } from "@/lib/projects/mcp-servers";
import { attachSandbox, type Sandbox } from "@/lib/sandbox";
import { append, baseShaOf, loadRun, stepBudget, workflowClock, type RunContext, type WithNow } from "./context";
import { runSandbox } from "./workspace";

/*
 * MCP servers as the implementer's tools: the servers a run may use (the repository's `.mcp.json` or
 * `.autonomous/mcp.json`, read from the commit the run's branch started from, and the project's), their tools listed
 * once per implementation session, and each call the model makes run in a durable step of its own, recorded as an
 * MCP_TOOL_CALLED event (redacted, capped). A step re-run after a crash that had recorded its call reuses the recorded
 * result: a finished call is never made twice.
 */

/** The repository's servers (the first of its MCP files that exists). A malformed file is skipped and named. */
async function repositoryServers(run: RunContext): Promise<{ servers: McpServer[]; problems: string[] }> {
  const ref = (await baseShaOf(run.runId)) ?? run.branch;
  for (const file of MCP_REPOSITORY_FILES) {
    const raw = await readFileAt({ repoPath: run.repoPath, ref, path: file });
    if (raw === null) continue;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (error) {
      return { servers: [], problems: [`${file} is not valid JSON (${(error as Error).message}); its servers are not used.`] };
    }
    const parsed = parseMcpServers(json, "repository");
    if ("error" in parsed) return { servers: [], problems: [`${file}: ${parsed.error}; its servers are not used.`] };
    return { servers: parsed.servers, problems: [] };
  }
  return { servers: [], problems: [] };
}

/**
 * Every MCP server of the run: the project's (its owners' settings) and the repository's; a repository server named
 * like a project one is left out (the owners' wins).
 */
export async function runMcpServers(run: RunContext): Promise<{ servers: McpServer[]; problems: string[] }> {
  const project = await projectMcpServersOf({ projectId: run.projectId });
  const repo = await repositoryServers(run);
  const taken = new Set(project.map((s) => s.name));
  const shadowed = repo.servers.filter((s) => taken.has(s.name)).map((s) => `The repository's MCP server "${s.name}" has the name of a project server; the project's is used.`);
  return { servers: [...project, ...repo.servers.filter((s) => !taken.has(s.name))], problems: [...repo.problems, ...shadowed] };
}

const callTimeout = () => Math.max(1_000, Math.min(120_000, stepBudget.ms() - 5_000));

/**
 * At the start of an implementation session: each server's tools, listed once (the session's state keeps them, so
 * a turn connects to nothing). A server that cannot be started or reached is named in `note` for the model.
 */
export async function listMcpSession({ run, sandbox: attach }: { run: RunContext; sandbox: () => Promise<Sandbox> }): Promise<{
  session: McpSession | undefined;
  note: string | null;
}> {
  const { servers, problems } = await runMcpServers(run);
  const tools: McpToolDef[] = [];
  const sources: McpSession["sources"] = {};
  // The sandbox only when there is a server to start in it (a run without MCP servers attaches nothing here).
  const sandbox = servers.length ? await attach() : null;
  // A new session starts its stdio servers anew; the ones started here to list their tools are kept for its calls.
  if (sandbox) await closeSessionServers(sandbox.id);
  for (const server of servers) {
    try {
      const listed = await withSessionMcpClient({ server, sandbox: sandbox!, timeoutMs: Math.min(30_000, callTimeout()) }, (client, options) =>
        listServerTools(client, server.name, options),
      );
      tools.push(...listed);
      sources[server.name] = server.source;
    } catch (error) {
      problems.push(`MCP server "${server.name}" is not available: ${redact((error as Error).message)}`);
      log.warn("an MCP server could not be listed", { runId: run.runId, server: server.name, error: redact(String(error)) });
    }
  }
  const note = problems.length ? `MCP servers:\n${problems.map((p) => `- ${p}`).join("\n")}` : null;
  return { session: tools.length ? redactDeep({ tools, sources }) : undefined, note };
}

function capped(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/**
 * The body of the step that makes the implementer's pending MCP call: the server is the session's (stdio, in the run's
 * sandbox, kept from the session's start by lib/agents/mcp/pool.ts, or started again) or reached (remote, where the
 * address policy allows), the tool called, the call recorded, and its result told to the implementer. A call that fails is the tool's error result, not the run's.
 */
export async function callMcpTool({
  runId,
  stepKey,
  state,
  taskId = null,
  workspace = null,
}: {
  runId: string;
  stepKey: string;
  state: ImplementerState;
  /** A parallel task's call: its stdio server starts in the task's sandbox (its lane's, `workspace`, else its own). */
  taskId?: string | null;
  workspace?: string | null;
}): Promise<
  WithNow<{ kind: "continue"; state: ImplementerState }>
> {
  const call = state.pendingMcp;
  if (!call) return { kind: "continue", state, now: workflowClock.now() };
  const db = await getDb();
  const recorded = (await findStepEvents(db as unknown as Parameters<typeof findStepEvents>[0], runId, stepKey)).find((e) => e.type === "MCP_TOOL_CALLED");
  let result: { text: string; isError: boolean };
  if (recorded?.type === "MCP_TOOL_CALLED") {
    // The step ran before and recorded its call, then crashed: the recorded result, not a second call.
    result = { text: recorded.payload.result, isError: recorded.payload.isError };
  } else {
    const run = await loadRun({ runId });
    const { servers } = await runMcpServers(run);
    const server = servers.find((s) => s.name === call.server);
    try {
      if (!server) throw new Error(`The MCP server "${call.server}" is no longer declared.`);
      const sandbox = await attachSandbox(runSandbox(run, taskId, workspace));
      result = await withSessionMcpClient({ server, sandbox, timeoutMs: callTimeout() }, (client, options) => callServerTool(client, { tool: call.tool, args: call.args }, options));
    } catch (error) {
      result = { text: `The MCP call failed: ${(error as Error).message}`, isError: true };
    }
    result = { text: capped(redact(result.text), MCP_LIMITS.resultChars), isError: result.isError };
    await append(runId, stepKey, [
      {
        type: "MCP_TOOL_CALLED",
        payload: { server: call.server, tool: call.tool, arguments: describeArgs(call.args, MCP_LIMITS.argumentChars), result: result.text, isError: result.isError },
      },
    ]);
  }
  return { kind: "continue", state: applyMcpResult(state, call, result), now: workflowClock.now() };
}
