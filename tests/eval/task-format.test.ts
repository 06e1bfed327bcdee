import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { git, gitOut } from "@/lib/git/run";
import { loadTasks, makeRepo, type EvalTask } from "@/scripts/eval/run";
import { checkInSandbox } from "@/scripts/eval/checkout";

/** The eval task format names a repository at a commit (mined and imported tasks) as well as inline files. */

async function twoCommitRepo() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gh-eval-format-"));
  await git(dir, ["init", "-q", "-b", "main"]);
  fs.writeFileSync(path.join(dir, "a.txt"), "first\n");
  await git(dir, ["add", "-A"]);
  await git(dir, ["commit", "-q", "-m", "first"]);
  const first = await gitOut(dir, ["rev-parse", "HEAD"]);
  fs.writeFileSync(path.join(dir, "a.txt"), "second\n");
  fs.writeFileSync(path.join(dir, "later.txt"), "from the future\n");
  await git(dir, ["add", "-A"]);
  await git(dir, ["commit", "-q", "-m", "second"]);
  return { dir, first, second: await gitOut(dir, ["rev-parse", "HEAD"]) };
}

describe("eval task format", () => {
  it("starts a repo task from a snapshot of the named commit: its tree, no later history, the source untouched", async () => {
    const { dir, first, second } = await twoCommitRepo();
    const task: EvalTask = { id: "snap", description: "", source: "history", repo: { path: dir, commit: first }, request: "x", check: "true" };
    const repo = await makeRepo(task);
    expect(fs.readFileSync(path.join(repo, "a.txt"), "utf8")).toBe("first\n");
    expect(fs.existsSync(path.join(repo, "later.txt"))).toBe(false);
    expect(await gitOut(repo, ["rev-list", "--count", "--all"])).toBe("1");
    // No object of the source's later commit is reachable or even present in the agent's repository.
    expect((await git(repo, ["cat-file", "-e", second], { allowFailure: true })).code).not.toBe(0);
    expect(await gitOut(dir, ["status", "--porcelain"])).toBe("");
    expect(await gitOut(dir, ["rev-parse", "HEAD"])).toBe(second);
  });

  it("runs a check in a sandboxed checkout with the hidden files written in, leaving no trace on the branch", async () => {
    const { dir } = await twoCommitRepo();
    const r = await checkInSandbox({ repoPath: dir, ref: "main", command: "grep -qx secret hidden/t.txt && grep -qx second a.txt", hiddenFiles: { "hidden/t.txt": "secret\n" } });
    expect(r).toMatchObject({ passed: true });
    const failed = await checkInSandbox({ repoPath: dir, ref: "main", command: "test -f hidden/t.txt" });
    expect(failed.passed).toBe(false);
    expect(await gitOut(dir, ["ls-tree", "-r", "--name-only", "main"])).not.toContain("hidden/t.txt");
  });

  it("loads a repo task from a file and refuses one that gives both files and repo", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gh-eval-tasks-"));
    fs.writeFileSync(path.join(dir, "ok.json"), JSON.stringify({ id: "ok", description: "", repo: { path: "/srv/r", commit: "abc1234" }, request: "r", check: "true" }));
    expect(loadTasks(dir)).toMatchObject([{ id: "ok", source: "file", repo: { path: "/srv/r", commit: "abc1234" } }]);
    fs.writeFileSync(path.join(dir, "both.json"), JSON.stringify({ id: "both", description: "", files: {}, repo: { path: "/srv/r", commit: "abc1234" }, request: "r", check: "true" }));
    expect(() => loadTasks(dir)).toThrow(/both\.json: files: give either files/);
  });
});
