import fs from "node:fs";
import { describe, expect, it, vi } from "vitest";
import { git } from "@/lib/git/run";
import { LocalSandbox } from "@/lib/sandbox";
import { makeRepo } from "../git/helpers";

/*
 * `git worktree prune` runs one at a time per repository (beside every `git worktree add`), so each one on the way to a
 * parallel task's sandbox, or out of it, is a wait in line: a round of tasks created its sandboxes with a prune each
 * before every add, and its merge step released them with a prune each, one after another.
 */

const spawned = vi.hoisted(() => ({ commands: [] as string[][] }));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("../git/spawn-record");
  return recordingSpawner(await importOriginal(), (request) => spawned.commands.push(commandOf(request)));
});

const prunes = () => spawned.commands.filter((c) => c.includes("worktree") && c.includes("prune")).length;

async function worktreePaths(repo: string): Promise<string[]> {
  const list = await git(repo, ["worktree", "list", "--porcelain"]);
  return list.stdout.split("\n").filter((l) => l.startsWith("worktree ")).map((l) => l.slice("worktree ".length));
}

describe("worktree prunes of sandboxes made and released side by side", () => {
  it("a new worktree with nothing left of an earlier one is added without a prune; four released at once prune at most twice, and none is left", async () => {
    const repo = await makeRepo();
    spawned.commands.length = 0;
    const sandboxes = await Promise.all(
      Array.from({ length: 4 }, (_, i) => LocalSandbox.create({ runId: `run_prune_${i}`, repoPath: repo, ref: "main", branch: `autonomous/prune-${i}`, isolation: "none" })),
    );
    expect(prunes()).toBe(0);
    expect(await worktreePaths(repo)).toHaveLength(5);

    spawned.commands.length = 0;
    await Promise.all(sandboxes.map((s) => s.destroy()));
    // The first prune may start before the others' files are gone; every later one joins the one waiting its turn.
    expect(prunes()).toBeLessThanOrEqual(2);
    expect(await worktreePaths(repo)).toHaveLength(1);
    for (const s of sandboxes) expect(fs.existsSync(s.workspacePath)).toBe(false);

    // Made again where one was (its files and git's entry gone, as after a release): still added, on its branch.
    const again = await LocalSandbox.create({ runId: "run_prune_0", repoPath: repo, ref: "main", branch: "autonomous/prune-0", isolation: "none" });
    expect(await worktreePaths(repo)).toHaveLength(2);
    expect((await git(again.workspacePath, ["rev-parse", "--abbrev-ref", "HEAD"], { worktree: again.location })).stdout.trim()).toBe("autonomous/prune-0");
    await again.destroy();
  });

  it("a worktree whose files were left behind (a crash) is pruned and made again", async () => {
    const repo = await makeRepo();
    const first = await LocalSandbox.create({ runId: "run_left", repoPath: repo, ref: "main", branch: "autonomous/left", isolation: "none" });
    // Its files go without git being told (as a crash mid-removal leaves them): git still lists it.
    fs.rmSync(first.workspacePath, { recursive: true, force: true });
    expect(await worktreePaths(repo)).toHaveLength(2);
    spawned.commands.length = 0;
    const again = await LocalSandbox.create({ runId: "run_left", repoPath: repo, ref: "main", branch: "autonomous/left", isolation: "none" });
    expect(prunes()).toBe(1);
    expect(await worktreePaths(repo)).toHaveLength(2);
    await again.destroy();
    expect(await worktreePaths(repo)).toHaveLength(1);
  });
});
