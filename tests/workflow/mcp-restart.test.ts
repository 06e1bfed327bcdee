import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createProject } from "@/lib/projects/queries";
import type { SessionUser } from "@/lib/auth/guard";
import { exited, startAppProcess } from "./app-child";
import { expectRunConsistent, launch, until, waitForStatus, waitForWorkflow } from "./harness";
import { repoWithNotesServer } from "./mcp-repo";

/**
 * MCP calls across a restart, with the app and its executor in a child process killed with SIGKILL (as
 * tests/workflow/crash.test.ts does): a finished call is never made again — its step is memoized, and a step re-run
 * whose result was lost finds the call recorded — while a call still running when the process died is made again
 * (at-least-once, like any step that had not finished).
 */

let current: ChildProcess | null = null;
const children: ChildProcess[] = [];
const armFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-mcp-restart-")), "arm.json");
let user: SessionUser;

async function startApp(): Promise<void> {
  const child = await startAppProcess(armFile);
  children.push(child);
  current = child;
}

beforeAll(async () => {
  const owner = await ensureLocalOwner();
  user = { id: owner.id, name: owner.name, via: "admin-token" };
  await startApp();
});

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

async function mcpCalls(runId: string) {
  return (await listEvents({ runId, limit: 10_000 })).filter((e) => e.type === "MCP_TOOL_CALLED").map((e) => e.payload as { tool: string; result: string });
}

/** The notes server's call log in the run's workspace (gitignored, so it survives in the worktree across a restart). */
function callLog(runId: string): string[] {
  const root = path.join(getEnv().dataDir, "workspaces");
  for (const dir of fs.existsSync(root) ? fs.readdirSync(root).filter((d) => d.startsWith(runId)) : []) {
    const file = path.join(root, dir, ".mcp-calls.log");
    if (fs.existsSync(file)) return fs.readFileSync(file, "utf8").trim().split("\n");
  }
  return [];
}

async function notesProject(name: string) {
  const repo = repoWithNotesServer();
  return createProject({ name, ownerId: user.id, repository: { type: "local", path: repo }, defaultConfig: { policy: { mcp: { "notes.*": "allow" } } } });
}

describe("MCP calls across a restart (kill -9 the app)", () => {
  it("a finished call whose step result was lost is not made again after the restart: the re-run step reuses the recorded call", { timeout: 180_000 }, async () => {
    const project = await notesProject("mcp-restart-finished");
    // Killed right after the step that recorded the first call answered, before the executor stored its result.
    fs.writeFileSync(armFile, JSON.stringify({ type: "MCP_TOOL_CALLED", since: Date.now() }));
    const run = await launch(user, project.id, 'Two notes\n\n[mcp: notes.where {"tag": "first"}]\n[mcp: notes.where {"tag": "second"}]', {
      trustMode: { planning: "auto", fixes: "manual" },
    });
    await exited(current!);
    expect(await mcpCalls(run.id)).toHaveLength(1);
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    await expectRunConsistent(run.id);
    // Each call once: the server counts the calls in its log (in the workspace, which survived the restart), and the
    // second call saw one call before it.
    const calls = await mcpCalls(run.id);
    expect(calls.map((c) => c.result.replace(/ nonce=.*$/, "").replace(/^home=\S+ /, ""))).toEqual(["calls=1 tag=first", "calls=2 tag=second"]);
  });

  it("a call still running when the process died is made again after the restart (at-least-once), and recorded once", { timeout: 180_000 }, async () => {
    const project = await notesProject("mcp-restart-during");
    const run = await launch(user, project.id, 'Hold a call\n\n[mcp: notes.hold {"tag": "held"}]\n[mcp: notes.where {"tag": "after"}]', {
      trustMode: { planning: "auto", fixes: "manual" },
    });
    // The server has the call (it logged it) and waits: the app dies during the call.
    await until(async () => callLog(run.id).includes("held"), "the held call to start", 120_000);
    current!.kill("SIGKILL");
    await exited(current!);
    expect(await mcpCalls(run.id)).toEqual([]);
    const workspace = path.dirname(
      fs
        .readdirSync(path.join(getEnv().dataDir, "workspaces"))
        .map((d) => path.join(getEnv().dataDir, "workspaces", d, ".mcp-calls.log"))
        .find((f) => f.includes(run.id) && fs.existsSync(f))!,
    );
    fs.writeFileSync(path.join(workspace, ".mcp-release"), "");
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    await expectRunConsistent(run.id);
    // The unfinished call was made twice (the server logged it twice: the call after it counts three), and the run
    // recorded it once, with the second answer.
    expect((await mcpCalls(run.id)).map((c) => c.result.replace(/ nonce=.*$/, "").replace(/^home=\S+ /, ""))).toEqual(["held=held", "calls=3 tag=after"]);
  });
});
