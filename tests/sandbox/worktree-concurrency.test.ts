import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { git, listWorktrees } from "@/lib/git/run";
import { LocalSandbox } from "@/lib/sandbox";
import { makeRepo } from "../git/helpers";

/*
 * Parallel runs of one project create and remove their worktrees at the same moment. git's worktree commands are not
 * safe to run at once on one repository: `git worktree add` reads every entry under .git/worktrees and fails on one that
 * another add is still writing ("fatal: failed to read .git/worktrees/<x>/commondir"), and `git worktree prune` may
 * delete such an entry as stale. Seen in `npm run bench -- workflow` (20 runs at once) as a failed step and a retry;
 * 8 of 100 bare `git worktree add`s failed that way when started 20 at a time. lib/sandbox/local.ts runs them one at a
 * time per repository, and retries that failure when it comes from another process.
 */

const sandboxes: LocalSandbox[] = [];
afterAll(async () => {
  await Promise.allSettled(sandboxes.map((s) => s.destroy()));
});

async function worktreePaths(repo: string): Promise<string[]> {
  const list = await git(repo, ["worktree", "list", "--porcelain"]);
  return list.stdout.split("\n").filter((l) => l.startsWith("worktree ")).map((l) => l.slice("worktree ".length));
}

describe("worktrees of one repository, created and removed at once", () => {
  it("creates 3 × 16 sandboxes on their own branches concurrently while the previous 16 are removed; all end on their branch, none is left", async () => {
    const repo = await makeRepo();
    let previous: LocalSandbox[] = [];
    for (let round = 0; round < 3; round++) {
      // This round's adds run beside the previous round's removals (each ends in a `git worktree prune`).
      const [created] = await Promise.all([
        Promise.allSettled(
          Array.from({ length: 16 }, (_, i) =>
            LocalSandbox.create({ runId: `run_wt_${round}_${i}`, repoPath: repo, ref: "main", branch: `autonomous/wt-${round}-${i}`, isolation: "none" }),
          ),
        ),
        Promise.all(previous.map((s) => s.destroy())),
      ]);
      const made = created.flatMap((c) => (c.status === "fulfilled" ? [c.value] : []));
      sandboxes.push(...made);
      const failures = created.flatMap((c) => (c.status === "rejected" ? [String((c.reason as Error).message)] : []));
      expect(failures).toEqual([]);
      for (const [i, s] of made.entries()) {
        const head = await git(s.workspacePath, ["symbolic-ref", "HEAD"], { worktree: s.location });
        expect(head.stdout.trim()).toBe(`refs/heads/autonomous/wt-${round}-${i}`);
      }
      expect((await worktreePaths(repo)).length).toBe(1 + made.length);
      previous = made;
    }
    await Promise.all(previous.map((s) => s.destroy()));
    sandboxes.splice(0);
    expect(await worktreePaths(repo)).toEqual([repo]);
  });

  it("retries an add that met another process's half-written worktree entry, once that process is done", async () => {
    const repo = await makeRepo();
    const finish = await halfWrittenEntry(repo);
    const raced = await git(repo, ["worktree", "add", "-b", "probe", path.join(repo, "..", `probe-${Date.now()}`), "main"], { allowFailure: true });
    expect(raced.stderr).toContain("failed to read .git/worktrees/other/commondir");

    // The other process finishes its entry 100 ms after our add starts.
    setTimeout(() => void finish(), 100);
    const sandbox = await LocalSandbox.create({ runId: "run_wt_raced", repoPath: repo, ref: "main", branch: "autonomous/raced", isolation: "none" });
    sandboxes.push(sandbox);
    const head = await git(sandbox.workspacePath, ["symbolic-ref", "HEAD"], { worktree: sandbox.location });
    expect(head.stdout.trim()).toBe("refs/heads/autonomous/raced");
  });

  it("lists the worktrees (delivery does) once another process's half-written entry is done", async () => {
    const repo = await makeRepo();
    const finish = await halfWrittenEntry(repo);
    expect((await git(repo, ["worktree", "list"], { allowFailure: true })).stderr).toContain("failed to read .git/worktrees/other/commondir");
    setTimeout(() => void finish(), 100);
    expect((await listWorktrees(repo)).map((w) => w.path)).toContain(repo);
  });
});

/**
 * What another process's `git worktree add` leaves for a moment: an entry whose commondir is not written yet (locked, as
 * git's own add holds it, so the prune before our add leaves it alone). A worktree command run now fails on it.
 * Returns what that process does next: it writes the entry's commondir.
 */
async function halfWrittenEntry(repo: string): Promise<() => Promise<void>> {
  const entry = path.join(repo, ".git", "worktrees", "other");
  await fs.mkdir(entry, { recursive: true });
  await fs.writeFile(path.join(entry, "gitdir"), path.join(repo, "..", "elsewhere", ".git") + "\n");
  await fs.writeFile(path.join(entry, "HEAD"), "ref: refs/heads/other\n");
  await fs.writeFile(path.join(entry, "locked"), "being added\n");
  await fs.writeFile(path.join(entry, "commondir"), "");
  return () => fs.writeFile(path.join(entry, "commondir"), "../..\n");
}
