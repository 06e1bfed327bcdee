import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { commitCheckpoint } from "@/lib/git";
import { releaseSandbox, repointSandbox, startTaskSandbox, type LocalSandbox } from "@/lib/sandbox";
import { git, makeRepo } from "../workflow/harness";

/*
 * A parallel lane's tasks share one worktree (lib/runs/steps/tasks.ts beginTask): the next task takes it over from the
 * task before instead of the worktree being removed, pruned and added again. What the next task finds must be what a
 * fresh worktree at the round's start commit holds — nothing the task before left: its committed files (they are on
 * its branch), its changes, untracked files, ignored build outputs, nested repositories, its home, its detached
 * commands, a rewritten `.git` entry.
 */

const opened: Array<{ options: Parameters<typeof releaseSandbox>[0] }> = [];
afterEach(async () => {
  for (const { options } of opened.splice(0)) await releaseSandbox(options).catch(() => null);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

/** Every file under `dir` (relative paths), `.git` left out. */
function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const abs = path.join(d, e.name);
      if (d === dir && e.name === ".git") continue;
      if (e.isDirectory()) walk(abs);
      else out.push(path.relative(dir, abs));
    }
  };
  walk(dir);
  return out.sort();
}

describe("a lane's worktree handed to its next task", () => {
  it("holds exactly the round's start commit on the next task's branch: nothing of the task before carries over", { timeout: 60_000 }, async () => {
    const repo = makeRepo();
    fs.writeFileSync(path.join(repo, ".gitignore"), "build/\n");
    fs.writeFileSync(path.join(repo, "shared.txt"), "as the round found it\n");
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "round start");
    const start = git(repo, "rev-parse", "main");
    const runId = `run_lane_${crypto.randomUUID().slice(0, 8)}`;
    const first = { runId, repoPath: repo, ref: "main", branch: "run--T1" };
    opened.push({ options: first });

    // The lane's first task: its branch cut at the run branch's tip with its worktree.
    const t1 = await startTaskSandbox(first);
    expect(t1.baseSha).toBe(start);
    expect(git(repo, "rev-parse", "refs/heads/run--T1")).toBe(start);

    // T1 works: a committed file, then everything a task may leave behind.
    await t1.writeFile("t1.txt", "T1's work\n");
    const done = await commitCheckpoint({ sandbox: t1, runId, taskId: "T1", title: "one" });
    await t1.writeFile("shared.txt", "changed by T1, never committed\n");
    await t1.writeFile("scratch.txt", "untracked\n");
    await t1.writeFile("build/out.o", "ignored build output\n");
    fs.mkdirSync(path.join(t1.workspacePath, "vendor", "lib"), { recursive: true });
    git(path.join(t1.workspacePath, "vendor", "lib"), "init", "-q");
    fs.mkdirSync(path.join(`${t1.workspacePath}.home`, ".cache"), { recursive: true });
    fs.writeFileSync(path.join(`${t1.workspacePath}.home`, ".cache", "left"), "T1's home\n");
    const { id } = await t1.startDetached!("sleep", ["60"]);
    const pid = (JSON.parse(fs.readFileSync(`${t1.workspacePath}.home/commands/${id}/meta.json`, "utf8")) as { pid: number }).pid;
    expect(alive(pid)).toBe(true);
    // The sandbox may rewrite its worktree's `.git` entry: host git never reads it, and the next task gets git's own.
    fs.rmSync(path.join(t1.workspacePath, ".git"));
    fs.mkdirSync(path.join(t1.workspacePath, ".git"));
    fs.writeFileSync(path.join(t1.workspacePath, ".git", "config"), "[core]\n\thooksPath = /tmp/evil\n");

    const t3 = (await repointSandbox(first, { branch: "run--T3", startSha: start })) as LocalSandbox;
    expect(t3).not.toBeNull();
    // The same worktree, now T3's: its branch cut at the round's start, checked out there.
    expect(t3.workspacePath).toBe(t1.workspacePath);
    expect(t3.branch).toBe("run--T3");
    expect(t3.baseSha).toBe(start);
    expect(git(repo, "rev-parse", "refs/heads/run--T3")).toBe(start);
    expect(await t3.head()).toBe(start);
    // T1's work stays on T1's branch.
    expect(git(repo, "rev-parse", "refs/heads/run--T1")).toBe(done.sha);
    expect(git(repo, "show", "run--T1:t1.txt")).toBe("T1's work");

    // Exactly the start commit's files, as it has them: no committed, changed, untracked, ignored or nested leftovers.
    expect(files(t3.workspacePath)).toEqual([".gitignore", "README.md", "shared.txt"]);
    expect(await t3.readFile("shared.txt")).toBe("as the round found it\n");
    expect(git(repo, "--git-dir", t3.location.gitDir, "--work-tree", t3.workspacePath, "status", "--porcelain", "--ignored")).toBe("");
    // Its home is empty, the detached command is gone, and `.git` is git's pointer again.
    expect(fs.readdirSync(`${t3.workspacePath}.home`)).toEqual([]);
    expect(await gone(pid)).toBe(true);
    expect(fs.readFileSync(path.join(t3.workspacePath, ".git"), "utf8")).toBe(`gitdir: ${t3.location.gitDir}\n`);

    // The next task's sandbox works: its commands run there, and its diff starts at the round's start.
    const ls = await t3.exec("ls", ["-A"]);
    expect(ls.stdout.split("\n").filter(Boolean).sort()).toEqual([".git", ".gitignore", "README.md", "shared.txt"]);
    await t3.writeFile("t3.txt", "T3's work\n");
    expect(await t3.diff()).toContain("t3.txt");
    expect(await t3.diff()).not.toContain("t1.txt");
  });

  it("hands nothing on when there is no worktree to hand on: the caller starts the task afresh", async () => {
    const repo = makeRepo();
    const start = git(repo, "rev-parse", "main");
    const runId = `run_lane_${crypto.randomUUID().slice(0, 8)}`;
    expect(await repointSandbox({ runId, repoPath: repo, ref: "main", branch: "run--T1" }, { branch: "run--T3", startSha: start })).toBeNull();
  });
});
