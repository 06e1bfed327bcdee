import { describe, expect, it } from "vitest";
import { mergeTaskBranches } from "@/lib/git";
import { git, gitOut } from "@/lib/git/run";
import { commitAll, makeRepo, writeFiles } from "./helpers";

/*
 * mergeTaskBranches (lib/git/task-branch.ts): a step's task branches merged into the run branch in the order given,
 * with the run branch moved once at the end; a conflict leaves its task out; a re-run (after a crash that came between
 * the move and the step's record) finds the tasks merged and makes nothing again.
 */

async function taskBranch(repo: string, run: string, name: string, files: Record<string, string>) {
  await git(repo, ["checkout", "-q", "-b", name, run]);
  await writeFiles(repo, files);
  await commitAll(repo, name);
  await git(repo, ["checkout", "-q", "main"]);
}

describe("merging task branches into the run branch", () => {
  it("merges in the order given, leaves a conflicting task out with both sides, puts a commit on top and moves the run branch once; run again, it makes nothing", async () => {
    const repo = await makeRepo({ "shared.txt": "base\n" });
    await git(repo, ["branch", "run", "main"]);
    await taskBranch(repo, "run", "run--T1", { "one.txt": "1\n" });
    await taskBranch(repo, "run", "run--T2", { "shared.txt": "T2 says\n" });
    await taskBranch(repo, "run", "run--T3", { "shared.txt": "T3 says\n", "three.txt": "3\n" });
    await taskBranch(repo, "run", "run--T4", { "four.txt": "4\n" });
    const start = await gitOut(repo, ["rev-parse", "run"]);
    const tasks = ["T1", "T2", "T3", "T4"].map((id) => ({ taskId: id, branch: `run--${id}`, title: `Task ${id}` }));
    const onTopSaw: string[][] = [];
    const onTop = async ({ results }: { tree: string; results: Array<{ status: string }> }) => {
      onTopSaw.push(results.map((r) => r.status));
      return { files: { "done.txt": results.map((r, i) => `${tasks[i]!.taskId} ${r.status}`).join("\n") }, message: "boxes" };
    };

    const results = await mergeTaskBranches({ repoPath: repo, runBranch: "run", runId: "run_x", tasks, onTop });
    expect(results.map((r) => r.status)).toEqual(["merged", "merged", "conflict", "merged"]);
    const conflict = results[2]!;
    if (conflict.status !== "conflict") throw new Error("T3 should conflict");
    expect(conflict.files).toEqual(["shared.txt"]);
    expect(conflict.sides).toEqual([{ path: "shared.txt", runBranch: "T2 says\n", task: "T3 says\n" }]);
    // Plan order on the first-parent line, the commit on top last; the branch moved from its start in one step.
    expect((await gitOut(repo, ["log", "--first-parent", "--format=%s", `${start}..run`])).split("\n").reverse()).toEqual([
      "Merge task T1: Task T1",
      "Merge task T2: Task T2",
      "Merge task T4: Task T4",
      "boxes",
    ]);
    expect(await gitOut(repo, ["reflog", "--format=%H", "refs/heads/run"])).toBe([await gitOut(repo, ["rev-parse", "run"]), start].join("\n"));
    expect(await gitOut(repo, ["show", "run:done.txt"])).toBe("T1 merged\nT2 merged\nT3 conflict\nT4 merged");
    const merges = results.filter((r) => r.status === "merged").map((r) => (r as { sha: string }).sha);
    expect(await gitOut(repo, ["rev-parse", `${merges[2]}^2`])).toBe(await gitOut(repo, ["rev-parse", "run--T4"]));

    // Run again (the step re-run after a crash): the merged tasks read as merged, with the same merge commits.
    const tip = await gitOut(repo, ["rev-parse", "run"]);
    const again = await mergeTaskBranches({ repoPath: repo, runBranch: "run", runId: "run_x", tasks: tasks.filter((t) => t.taskId !== "T3"), onTop: async () => null });
    expect(again).toEqual(merges.map((sha) => ({ status: "up_to_date", sha })));
    expect(await gitOut(repo, ["rev-parse", "run"])).toBe(tip);
  });

  it("a task branch that is gone says which", async () => {
    const repo = await makeRepo();
    await git(repo, ["branch", "run", "main"]);
    await expect(mergeTaskBranches({ repoPath: repo, runBranch: "run", runId: "run_y", tasks: [{ taskId: "T9", branch: "run--T9", title: "x" }] })).rejects.toThrow(/run--T9 does not exist/);
    await expect(mergeTaskBranches({ repoPath: repo, runBranch: "nope", runId: "run_y", tasks: [] })).rejects.toThrow(/nope does not exist/);
  });
});
