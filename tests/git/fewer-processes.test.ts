import { describe, expect, it, vi } from "vitest";
import { commitFiles, createRunBranch } from "@/lib/git";
import { git, gitOut } from "@/lib/git/run";
import { commitAll, makeRepo, writeFiles } from "./helpers";

/*
 * A run's steps outside its tasks (its branch, the tasks.md, the plan's record, the delivery's records and memory) are a
 * row of git processes one after another on its critical path: each process they no longer need is time every run
 * saves, whatever its number of parallel tasks.
 */

const spawned = vi.hoisted(() => ({ commands: [] as string[][] }));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("./spawn-record");
  return recordingSpawner(await importOriginal(), (request) => spawned.commands.push(commandOf(request)));
});

describe("git processes of a run's own steps", () => {
  it("the run branch is made with three processes (its name and both bases read with one), from origin's base when that is ahead", async () => {
    const repo = await makeRepo();
    const first = await gitOut(repo, ["rev-parse", "main"]);
    await writeFiles(repo, { "later.txt": "later\n" });
    const ahead = await commitAll(repo, "later");
    await git(repo, ["update-ref", "refs/remotes/origin/main", ahead]);
    await git(repo, ["update-ref", "refs/heads/main", first]);

    spawned.commands.length = 0;
    const made = await createRunBranch({ repoPath: repo, runId: "run_procs1", request: "Make a branch", baseBranch: "main" });
    expect(made).toEqual({ branch: made.branch, baseSha: ahead, created: true });
    // One read of the three refs, the ancestry check (local main is behind origin's), the branch.
    expect(spawned.commands).toHaveLength(3);
    expect(await gitOut(repo, ["rev-parse", `refs/heads/${made.branch}`])).toBe(ahead);

    spawned.commands.length = 0;
    expect(await createRunBranch({ repoPath: repo, runId: "run_procs1", request: "Make a branch", baseBranch: "main", branch: made.branch })).toEqual({ ...made, created: false });
    expect(spawned.commands).toHaveLength(2);
  });

  it("a commit of three files takes the processes a commit of one does", async () => {
    const repo = await makeRepo();
    spawned.commands.length = 0;
    await commitFiles({ repoPath: repo, branch: "main", files: { "one.txt": "1\n" }, message: "one" });
    const one = spawned.commands.length;

    spawned.commands.length = 0;
    const three = await commitFiles({ repoPath: repo, branch: "main", files: { "a/x.txt": "x\n", "b.txt": "b\n", "one.txt": null }, message: "three" });
    expect(three.changed).toBe(true);
    expect(spawned.commands.length).toBe(one);
    expect(spawned.commands.filter((c) => c.includes("hash-object"))).toHaveLength(1);
    expect(await gitOut(repo, ["show", "main:a/x.txt"])).toBe("x");
    expect(await gitOut(repo, ["ls-tree", "--name-only", "main"])).toBe(["README.md", "a", "b.txt", "src"].join("\n"));

    // The same content again commits nothing.
    expect((await commitFiles({ repoPath: repo, branch: "main", files: { "a/x.txt": "x\n", "b.txt": "b\n" }, message: "again" })).changed).toBe(false);
    expect(await gitOut(repo, ["rev-parse", "main"])).toBe(three.sha);
  });
});
