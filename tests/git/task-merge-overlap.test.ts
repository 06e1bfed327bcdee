import { describe, expect, it, vi } from "vitest";
import { mergeTaskBranches } from "@/lib/git";
import { git, gitOut } from "@/lib/git/run";
import { commitAll, makeRepo, writeFiles } from "./helpers";

/*
 * A round's merge step (lib/git/task-branch.ts mergeTaskBranches) is on a parallel run's critical path at the round's
 * end. What it commits on top of its merges (the tasks' checked boxes) is read from the merges' tree while the last
 * merge's commit is still being made, rather than after it: one git process fewer in a row. Here the last merge's
 * commit-tree is held until what goes on top has been asked for (or a few seconds have passed): it is asked for first.
 */

const gate = vi.hoisted(() => ({
  /** Set while a test holds merge commits (two parents) until `onTop` has been called. */
  armed: false,
  onTopCalled: null as null | Promise<void>,
  release: null as null | (() => void),
  heldTooLong: false,
}));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/git/spawner")>();
  return {
    ...original,
    runChild: async (request: Parameters<typeof original.runChild>[0]) => {
      const merge = request.args.includes("commit-tree") && request.args.filter((a) => a === "-p").length === 2;
      if (gate.armed && merge && gate.onTopCalled) {
        const timer = new Promise<"late">((resolve) => setTimeout(() => resolve("late"), 5_000));
        if ((await Promise.race([gate.onTopCalled.then(() => "called" as const), timer])) === "late") gate.heldTooLong = true;
      }
      return original.runChild(request);
    },
  };
});

async function taskBranch(repo: string, run: string, name: string, files: Record<string, string>) {
  await git(repo, ["checkout", "-q", "-b", name, run]);
  await writeFiles(repo, files);
  await commitAll(repo, name);
  await git(repo, ["checkout", "-q", "main"]);
}

describe("a merge step's commit on top of its merges", () => {
  it("is read from the merges' tree while the last merge commit is being made; the branch ends as before", { timeout: 60_000 }, async () => {
    const repo = await makeRepo({ "tasks.md": "- [ ] T1\n" });
    await git(repo, ["branch", "run", "main"]);
    await taskBranch(repo, "run", "run--T1", { "one.txt": "1\n" });
    const start = await gitOut(repo, ["rev-parse", "run"]);
    gate.onTopCalled = new Promise<void>((resolve) => (gate.release = resolve));
    gate.armed = true;
    let read: string | null = null;
    try {
      const results = await mergeTaskBranches({
        repoPath: repo,
        runBranch: "run",
        runId: "run_x",
        tasks: [{ taskId: "T1", branch: "run--T1", title: "Task T1" }],
        onTop: async ({ tree }) => {
          gate.release!();
          // The merges' tree holds the task's work already.
          read = await gitOut(repo, ["cat-file", "blob", `${tree}:one.txt`]);
          return { files: { "tasks.md": "- [x] T1\n" }, message: "boxes" };
        },
      });
      expect(gate.heldTooLong).toBe(false);
      expect(read).toBe("1");
      expect(results).toEqual([{ status: "merged", sha: expect.stringMatching(/^[0-9a-f]{40}$/) }]);
      const merge = (results[0] as { sha: string }).sha;
      // The merge commit, then the boxes on top of it; the run branch moved once, to the boxes.
      expect((await gitOut(repo, ["log", "--first-parent", "--format=%s", `${start}..run`])).split("\n")).toEqual(["boxes", "Merge task T1: Task T1"]);
      expect(await gitOut(repo, ["rev-parse", "run^"])).toBe(merge);
      expect(await gitOut(repo, ["rev-parse", `${merge}^2`])).toBe(await gitOut(repo, ["rev-parse", "run--T1"]));
      expect(await gitOut(repo, ["show", "run:tasks.md"])).toBe("- [x] T1");
    } finally {
      gate.armed = false;
    }
  });
});
