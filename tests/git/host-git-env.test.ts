import fs from "node:fs/promises";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseChildEnv, resetEnvCache } from "@/lib/env";
import { LocalSandbox } from "@/lib/sandbox";
import { git, gitOut } from "@/lib/git/run";
import { workspaceTree } from "@/lib/git/checkpoint";
import { makeRepo } from "./helpers";

/*
 * Host git takes nothing from the server's own environment that could point it at planted metadata or a planted program:
 * GIT_DIR / GIT_WORK_TREE / GIT_CONFIG_* / GIT_EXEC_PATH are dropped, and PATH keeps only absolute directories, so a
 * `git` (or any helper) a sandbox writes into its worktree is never what host git — run with that worktree as its cwd —
 * starts. A server launched from a git hook, a shell with `.` on PATH, or an npm script all set such variables.
 */

const saved: Record<string, string | undefined> = {};
let canaries: string;
let planted: string;
let repo: string;
let sandbox: LocalSandbox;

const canary = (name: string) => path.join(canaries, name);

async function plantProgram(dir: string, name: string, canaryName: string) {
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, name), `#!/bin/sh\ntouch ${canary(canaryName)}\nexit 0\n`, { mode: 0o755 });
}

beforeAll(async () => {
  canaries = await fs.mkdtemp(path.join(os.tmpdir(), "gh-hostenv-"));
  repo = await makeRepo();
  // A planted repository the server's GIT_DIR would point at: its config runs a canary as fsmonitor and pager.
  planted = await makeRepo({ "x.txt": "x\n" });
  await plantProgram(planted, "monitor.sh", "git-dir");
  await git(planted, ["config", "core.fsmonitor", path.join(planted, "monitor.sh")]);
  await git(planted, ["config", "core.worktree", "/etc"]);
  await plantProgram(path.join(planted, "exec-path"), "git-status", "exec-path");
  await plantProgram(path.join(planted, "exec-path"), "git-diff", "exec-path");

  sandbox = await LocalSandbox.create({ runId: "run_hostenv", repoPath: repo, ref: "main", isolation: "none" });
  // What a sandboxed command can leave in its worktree: a `git` and a `bin/git` that host git must never start.
  await plantProgram(sandbox.workspacePath, "git", "relative-path");
  await plantProgram(path.join(sandbox.workspacePath, "bin"), "git", "relative-path-bin");
  await sandbox.writeFile("src/app.ts", "export const a = 2;\n");

  for (const name of ["PATH", "GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "GIT_EXEC_PATH", "GIT_CONFIG_GLOBAL"]) {
    saved[name] = process.env[name];
  }
  process.env.PATH = `.:bin::${process.env.PATH}`;
  process.env.GIT_DIR = path.join(planted, ".git");
  process.env.GIT_WORK_TREE = "/etc";
  process.env.GIT_CONFIG_PARAMETERS = `'core.pager'='${path.join(planted, "monitor.sh")}'`;
  process.env.GIT_CONFIG_COUNT = "1";
  process.env.GIT_CONFIG_KEY_0 = "diff.external";
  process.env.GIT_CONFIG_VALUE_0 = path.join(planted, "monitor.sh");
  process.env.GIT_EXEC_PATH = path.join(planted, "exec-path");
  process.env.GIT_CONFIG_GLOBAL = path.join(planted, ".git", "config");
  resetEnvCache();
});

afterAll(async () => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  resetEnvCache();
  await sandbox?.destroy();
});

describe("host git ignores the server's environment", () => {
  it("child processes get only absolute PATH entries and no GIT_* variable of the server", () => {
    const env = baseChildEnv();
    expect(env.PATH!.split(":").every((dir) => dir.startsWith("/"))).toBe(true);
    expect(env.PATH).not.toMatch(/(^|:)(\.|bin|)(:|$)/);
    expect(Object.keys(env).filter((k) => k.startsWith("GIT_"))).toEqual([]);
  });

  it("git run in a worktree holding a planted `git` starts the real one, and the sandbox's diff and tree run nothing planted", async () => {
    expect(await gitOut(sandbox.workspacePath, ["rev-parse", "--show-toplevel"])).toBe(sandbox.workspacePath);
    const diff = await sandbox.diff();
    expect(diff).toContain("+export const a = 2;");
    expect(await workspaceTree(sandbox)).toMatch(/^[0-9a-f]{40}$/);
    for (const name of ["relative-path", "relative-path-bin", "git-dir", "exec-path"]) expect(existsSync(canary(name))).toBe(false);
  });

  it("GIT_DIR / GIT_WORK_TREE from the server never redirect host git to planted metadata or the host's /etc", async () => {
    expect(await gitOut(repo, ["rev-parse", "--show-toplevel"])).toBe(repo);
    const files = (await gitOut(repo, ["ls-files"])).split("\n");
    expect(files).toEqual(["README.md", "src/app.ts"]);
    await git(repo, ["status", "--porcelain"]);
    await git(repo, ["diff", "HEAD"]);
    expect(existsSync(canary("git-dir"))).toBe(false);
    expect(existsSync(canary("exec-path"))).toBe(false);
  });
});
