import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseChildEnv, resetEnvCache } from "@/lib/env";
import { commitCheckpoint, createRunBranch } from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import { createSandbox, PathEscapeError, shellQuote, type E2BClient, type E2BRemote } from "@/lib/sandbox";
import type { E2BCommandHandle, E2BCommandResult, E2BCreateOptions, E2BRunOptions } from "@/lib/sandbox/e2b";
import { makeRepo } from "../git/helpers";

/**
 * A stand-in for the E2B service: the "remote" is a temp directory and commands run in bash on this machine, exactly as
 * E2B would receive them (one command string). It proves upload, quoting, diff, sync-back and kill — not E2B itself.
 */
type BackgroundOptions = E2BRunOptions & { background?: boolean; stdin?: boolean; onStdout?: (data: string) => void; onStderr?: (data: string) => void };

function fakeClient() {
  const calls: {
    created: E2BCreateOptions[];
    commands: { cmd: string; envs?: Record<string, string>; background?: boolean; stdin?: boolean; timeoutMs?: number }[];
    stdin: string[];
    killed: number;
  } = {
    created: [],
    commands: [],
    stdin: [],
    killed: 0,
  };
  // Background commands as E2B runs them (`bash -l -c <cmd>`, output streamed to the callbacks, stdin open only when
  // asked), here as local processes; a pid is E2B's process id.
  const background = new Map<number, ChildProcess>();
  let nextPid = 1000;
  const startBackground = (cmd: string, opts: BackgroundOptions): E2BCommandHandle => {
    const child = spawn("bash", ["-c", cmd], { cwd: opts.cwd, env: baseChildEnv(opts.envs) as NodeJS.ProcessEnv, stdio: [opts.stdin ? "pipe" : "ignore", "pipe", "pipe"] });
    const pid = nextPid++;
    background.set(pid, child);
    let stdout = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => ((stdout += d), opts.onStdout?.(d)));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => ((stderr += d), opts.onStderr?.(d)));
    const timer = opts.timeoutMs ? setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs) : null;
    const done = new Promise<E2BCommandResult>((resolve, reject) =>
      child.on("close", (code) => {
        if (timer) clearTimeout(timer);
        background.delete(pid);
        const result = { exitCode: code ?? -1, stdout, stderr };
        if (result.exitCode === 0) resolve(result);
        else reject(Object.assign(new Error("CommandExitError"), result));
      }),
    );
    done.catch(() => null);
    return { pid, wait: () => done, kill: async () => child.kill("SIGKILL") };
  };
  const client: E2BClient = {
    async create(options) {
      calls.created.push(options);
      const remote: E2BRemote = {
        sandboxId: "fake123",
        files: {
          async write(file, data) {
            await fs.mkdir(path.dirname(file), { recursive: true });
            await fs.writeFile(file, typeof data === "string" ? data : Buffer.from(data));
          },
          read: (file) => fs.readFile(file, "utf8"),
        },
        commands: {
          run: (async (cmd: string, opts: BackgroundOptions) => {
            calls.commands.push({ cmd, envs: opts.envs, ...(opts.background ? { background: true, stdin: opts.stdin, timeoutMs: opts.timeoutMs } : {}) });
            if (opts.background) return startBackground(cmd, opts);
            const r = spawnSync("bash", ["-c", cmd], { cwd: opts.cwd, env: baseChildEnv(opts.envs) as NodeJS.ProcessEnv, encoding: "utf8" });
            const result = { exitCode: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
            if (result.exitCode !== 0) throw Object.assign(new Error("CommandExitError"), result);
            return result;
          }) as E2BRemote["commands"]["run"],
          async sendStdin(pid, data) {
            const child = background.get(pid);
            if (!child?.stdin) throw new Error(`no command with stdin: ${pid}`);
            calls.stdin.push(data);
            await new Promise<void>((resolve, reject) => child.stdin!.write(data, (e) => (e ? reject(e) : resolve())));
          },
        },
        async kill() {
          calls.killed++;
          return true;
        },
      };
      return remote;
    },
  };
  return { client, calls, background };
}

let repo: string;
let remoteBase: string;

beforeAll(async () => {
  process.env.E2B_API_KEY = "e2b_test_key_not_real_0123456789";
  process.env.ANTHROPIC_API_KEY = "sk-ant-fake-secret-0123456789";
  resetEnvCache();
  repo = await makeRepo();
  remoteBase = await fs.mkdtemp(path.join(os.tmpdir(), "gatehouse-fake-e2b-"));
});
afterAll(() => {
  delete process.env.E2B_API_KEY;
  delete process.env.ANTHROPIC_API_KEY;
  resetEnvCache();
});

describe("E2B sandbox (fake client, no network)", () => {
  it("quotes every argument so the command string carries them as data", () => {
    const r = spawnSync("bash", ["-c", ["printf", "%s|", "a b", "$(id)", "it's", "; rm -rf /"].map(shellQuote).join(" ")], { encoding: "utf8" });
    expect(r.stdout).toBe("a b|$(id)|it's|; rm -rf /|");
  });

  it("is chosen when E2B_API_KEY is set: uploads the repo, internet off, runs commands, returns the diff, syncs back, is killed on destroy", async () => {
    const { client, calls } = fakeClient();
    const runId = "run_e2b01";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "e2b work", baseBranch: "main" });
    const sandbox = await createSandbox({ runId, repoPath: repo, ref: branch, branch, e2bClient: client, remoteRoot: path.join(remoteBase, "first") });
    expect(sandbox.kind).toBe("e2b");
    expect(sandbox.isolated).toBe(true);
    expect(calls.created).toEqual([expect.objectContaining({ apiKey: "e2b_test_key_not_real_0123456789", allowInternetAccess: false, metadata: { gatehouseRunId: runId } })]);
    expect(await fs.readFile(path.join(remoteBase, "first", "README.md"), "utf8")).toBe("# demo\n");
    await sandbox.destroy();
    expect(calls.killed).toBe(1);

    // Against a remote root we can inspect.
    const root = path.join(remoteBase, "repo");
    const { E2BSandbox } = await import("@/lib/sandbox/e2b");
    const s = await E2BSandbox.create({ runId, repoPath: repo, ref: branch, branch, client, remoteRoot: root, allowInternet: true });
    expect(calls.created.at(-1)?.allowInternetAccess).toBe(true);
    expect(await s.readFile("README.md")).toBe("# demo\n");
    await expect(s.readFile("../etc/passwd")).rejects.toBeInstanceOf(PathEscapeError);
    await fs.symlink("/etc", path.join(root, "etc-link"));
    await expect(s.readFile("etc-link/hostname")).rejects.toBeInstanceOf(PathEscapeError);
    await fs.rm(path.join(root, "etc-link"));

    await s.writeFile("src/new file.ts", "export const n = 1;\n");
    const r = await s.exec("printf", ["%s", "$(touch pwned); echo no"], { env: { ANTHROPIC_API_KEY: "x", FINE: "1" } });
    expect(r.stdout).toBe("$(touch pwned); echo no");
    await expect(fs.access(path.join(root, "pwned"))).rejects.toThrow();
    expect(calls.commands.at(-1)?.envs).toEqual({ FINE: "1" });
    expect(JSON.stringify(calls.commands)).not.toContain("sk-ant-fake-secret");
    expect(JSON.stringify(calls.commands)).not.toContain("e2b_test_key_not_real");

    const big = await s.exec("head", ["-c", "300000", "/dev/zero"], { maxOutputBytes: 1000 });
    expect(big.truncated).toBe(true);
    expect(big.stdout).toContain("bytes omitted");

    const diff = await s.diff();
    expect(diff).toContain("src/new file.ts");
    expect(diff).toContain("+export const n = 1;");

    // Checkpoint: the remote changes come back into the local worktree and are committed on the run branch.
    const cp = await commitCheckpoint({ sandbox: s, runId, taskId: "T1", title: "remote work" });
    expect(await gitOut(repo, ["show", `${cp.sha}:src/new file.ts`])).toBe("export const n = 1;");
    await s.writeFile("src/new file.ts", "export const n = 2;\n");
    const cp2 = await commitCheckpoint({ sandbox: s, runId, taskId: "T2", title: "more remote work" });
    expect(await gitOut(repo, ["show", `${cp2.sha}:src/new file.ts`])).toBe("export const n = 2;");
    expect(await gitOut(repo, ["rev-parse", branch])).toBe(cp2.sha);

    const killed = calls.killed;
    await s.destroy();
    expect(calls.killed).toBe(killed + 1);
    await expect(fs.access(s.workspacePath)).rejects.toThrow();
  });

  it("takes back file contents only: a hostile remote's patch that touches .git or leaves the worktree is refused", async () => {
    const { client } = fakeClient();
    const runId = "run_e2b_hostile";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "e2b hostile", baseBranch: "main" });
    const { E2BSandbox } = await import("@/lib/sandbox/e2b");
    const s = await E2BSandbox.create({ runId, repoPath: repo, ref: branch, branch, client, remoteRoot: path.join(remoteBase, "hostile") });
    const configBefore = await fs.readFile(path.join(repo, ".git", "config"), "utf8");
    const patches = [
      "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -0,0 +1 @@\n+[core]\n",
      "diff --git a/../outside.txt b/../outside.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+x\n",
      "diff --git a/sub/.git/hooks/post-commit b/sub/.git/hooks/post-commit\nnew file mode 100755\n--- /dev/null\n+++ b/sub/.git/hooks/post-commit\n@@ -0,0 +1 @@\n+touch pwned\n",
    ];
    const remote = (s as unknown as { remote: E2BRemote }).remote;
    const run = remote.commands.run.bind(remote.commands);
    for (const patch of patches) {
      // What the remote answers when asked for its changes: a patch it made up.
      remote.commands.run = (async (cmd: string, opts: E2BRunOptions) =>
        cmd.startsWith("git add -A && git diff --cached") ? { exitCode: 0, stdout: patch, stderr: "" } : run(cmd, opts)) as E2BRemote["commands"]["run"];
      await expect(commitCheckpoint({ sandbox: s, runId, taskId: "T1", title: "hostile" })).rejects.toThrow(/git apply failed/);
    }
    expect(await fs.readFile(path.join(repo, ".git", "config"), "utf8")).toBe(configBefore);
    await expect(fs.access(path.join(path.dirname(s.workspacePath), "outside.txt"))).rejects.toThrow();
    await expect(fs.access(path.join(s.workspacePath, "sub", ".git"))).rejects.toThrow();
    await s.destroy();
  });

  it("detached commands: run in the remote workspace beside the step, report exit code and output once ended, time out and are killed", async () => {
    const { client } = fakeClient();
    const runId = "run_e2b_detached";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "e2b detached", baseBranch: "main" });
    const { E2BSandbox } = await import("@/lib/sandbox/e2b");
    const root = path.join(remoteBase, "detached");
    const s = await E2BSandbox.create({ runId, repoPath: repo, ref: branch, branch, client, remoteRoot: root });
    const ended = async (id: string) => {
      for (let i = 0; i < 200; i++) {
        const status = await s.detachedStatus(id);
        if (status.state === "exited") return status.result;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("never ended");
    };

    const { id } = await s.startDetached("sh", ["-c", "sleep 2; echo made > made.txt; echo out; echo err >&2; exit 3"]);
    expect(await s.detachedStatus(id)).toEqual({ state: "running" });
    const result = await ended(id);
    expect(result).toMatchObject({ exitCode: 3, stdout: "out\n", stderr: "err\n", timedOut: false, truncated: false });
    expect(await s.detachedStatus(id)).toEqual({ state: "exited", result });
    expect(await s.readFile("made.txt")).toBe("made\n");
    // The output files are beside the repository, not in it.
    expect(await fs.readdir(`${root}.commands/${id}`)).toEqual(expect.arrayContaining(["stdout", "stderr", "exit"]));
    expect((await s.diff()).includes("stdout")).toBe(false);

    const slow = await s.startDetached("sleep", ["41.5"], { timeoutMs: 200 });
    expect(await ended(slow.id)).toMatchObject({ exitCode: null, timedOut: true });
    const killed = await s.startDetached("sleep", ["42.5"]);
    await s.killDetached(killed.id);
    expect(await ended(killed.id)).toMatchObject({ exitCode: null, timedOut: false });
    for (const pidFile of [`${root}.commands/${slow.id}/pid`, `${root}.commands/${killed.id}/pid`]) {
      const pid = Number(await fs.readFile(pidFile, "utf8"));
      let alive = true;
      for (let i = 0; i < 100 && alive; i++) {
        try {
          process.kill(pid, 0);
          alive = !(await fs.readFile(`/proc/${pid}/status`, "utf8")).match(/^State:\s+Z/m);
          if (alive) await new Promise((r) => setTimeout(r, 50));
        } catch {
          alive = false;
        }
      }
      expect(alive).toBe(false);
    }
    await s.destroy();
  });
  it("a stdio MCP server runs inside the E2B sandbox as a background command with stdin open, is called through the SDK's client, and is killed after", { timeout: 60_000 }, async () => {
    const { client, calls, background } = fakeClient();
    const runId = "run_e2b_mcp";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "e2b mcp", baseBranch: "main" });
    const { E2BSandbox } = await import("@/lib/sandbox/e2b");
    const root = path.join(remoteBase, "mcp");
    const s = await E2BSandbox.create({ runId, repoPath: repo, ref: branch, branch, client, remoteRoot: root });
    const { withMcpClient, listServerTools, callServerTool } = await import("@/lib/agents/mcp/client");
    // The notes server (tests/fixtures/mcp/notes-server.mjs, written with the official SDK), as a repository declares it.
    const server = {
      name: "notes",
      source: "repository" as const,
      type: "stdio" as const,
      command: "node",
      args: [path.resolve("tests/fixtures/mcp/notes-server.mjs")],
      env: { NOTES_FLAG: "1", ANTHROPIC_API_KEY: "sk-ant-leak" },
    };
    const result = await withMcpClient({ server, sandbox: s, timeoutMs: 20_000 }, async (mcp, options) => {
      const tools = await listServerTools(mcp, "notes", options);
      expect(tools.map((t) => t.tool)).toEqual(["add", "where", "count", "hold", "wipe"]);
      const sum = await callServerTool(mcp, { tool: "add", args: { a: 2, b: 40 } }, options);
      const where = await callServerTool(mcp, { tool: "where", args: { tag: "e2b" } }, options);
      return { sum, where };
    });
    expect(result.sum).toEqual({ text: "sum=42", isError: false });
    expect(result.where.text).toMatch(/^home=.* calls=1 tag=e2b nonce=/);
    // It ran in the remote workspace (its call log is there), started as E2B's documented background command.
    expect(await fs.readFile(path.join(root, ".mcp-calls.log"), "utf8")).toBe("e2b\n");
    const started = calls.commands.filter((c) => c.background);
    expect(started).toEqual([{ cmd: `exec 'node' '${server.args[0]}'`, envs: { NOTES_FLAG: "1" }, background: true, stdin: true, timeoutMs: 50_000 }]);
    expect(calls.stdin.some((line) => line.includes('"method":"tools/call"'))).toBe(true);
    // Closing the client killed the process.
    for (let i = 0; i < 100 && background.size; i++) await new Promise((r) => setTimeout(r, 20));
    expect(background.size).toBe(0);

    // A server whose process ends mid-conversation: the pending request fails with the connection, not at its timeout.
    const dying = { ...server, name: "dying", command: "sh", args: ["-c", "read line; echo bye >&2; exit 3"], env: {} };
    await expect(withMcpClient({ server: dying, sandbox: s, timeoutMs: 600_000 }, (mcp, options) => listServerTools(mcp, "dying", options))).rejects.toThrow(/Connection closed/);
    await s.destroy();
  });
});
