import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commitWorkInProgress, createRunBranch } from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import { attachSandbox, forgetAttachedSandboxes, releaseSandbox, type CreateSandboxOptions, type SandboxRequest } from "@/lib/sandbox";
import { makeRepo } from "../git/helpers";

/*
 * A step names the run's sandbox by id and hands over how to read its options (lib/runs/steps/workspace.ts runSandbox:
 * the repository's .autonomous/config.json, one git process). The options are read only when a sandbox has to be made
 * or reopened from disk: an open sandbox was made with them, and every turn of every task used to pay that read on its
 * way to the model.
 */

let repo: string;
const made: string[] = [];

beforeAll(async () => {
  repo = await makeRepo();
});
afterAll(async () => {
  for (const runId of made) await releaseSandbox({ runId, read: async () => ({ runId, repoPath: repo, ref: "main", branch: "main" }) }).catch(() => {});
});

/** A request whose reads are counted; the options carry an excluded path, so a sandbox made with them shows it. */
async function counted(runId: string) {
  const { branch } = await createRunBranch({ repoPath: repo, runId, request: "lazy options", baseBranch: "main" });
  made.push(runId);
  const reads = { n: 0 };
  const options: CreateSandboxOptions & { branch: string } = { runId, repoPath: repo, ref: branch, branch, kind: "local", excludePaths: ["private"] };
  const request = (diffBase?: string): SandboxRequest => ({
    runId,
    ...(diffBase ? { diffBase } : {}),
    read: async () => {
      reads.n++;
      return { ...options, ...(diffBase ? { diffBase } : {}) };
    },
  });
  return { branch, reads, request };
}

describe("a sandbox request's options are read only when a sandbox is made", () => {
  it("the first attach reads them and makes the sandbox with them; attaches while it is open read nothing", async () => {
    const { reads, request } = await counted("run_lazyopts01");
    const first = await attachSandbox(request());
    expect(reads.n).toBe(1);
    // Made with what was read: the excluded path is never committed nor shown in a diff.
    await first.writeFile("private/key.txt", "not for the branch\n");
    await first.writeFile("shown.txt", "shown\n");
    const diff = await first.diff();
    expect(diff).toContain("shown.txt");
    expect(diff).not.toContain("private/key.txt");

    for (let i = 0; i < 3; i++) expect(await attachSandbox(request())).toBe(first);
    expect(reads.n).toBe(1);
  });

  it("an attach that asks for another diff base reads them again (the worktree is reattached with that base)", async () => {
    const { branch, reads, request } = await counted("run_lazyopts02");
    const base = await gitOut(repo, ["rev-parse", branch]);
    const first = await attachSandbox(request());
    await first.writeFile("work.txt", "work\n");
    await commitWorkInProgress({ sandbox: first, runId: "run_lazyopts02", reason: "approval" });
    await releaseSandbox(request());
    expect(reads.n).toBe(1);
    // Attached again after the wait: made anew (a read), diffing from the committed work.
    const later = await attachSandbox(request());
    expect(reads.n).toBe(2);
    expect(await later.diff()).not.toContain("work.txt");
    // Asked for the run's base: reattached with it (a read), and the committed work is in its diff.
    const validation = await attachSandbox(request(base));
    expect(reads.n).toBe(3);
    expect(await validation.diff()).toContain("work.txt");
  });

  it("a release of an open sandbox reads nothing; after a restart it reopens the worktree on disk with them", async () => {
    const { reads, request } = await counted("run_lazyopts03");
    const first = await attachSandbox(request());
    await first.writeFile("left.txt", "left in the worktree\n");
    expect(reads.n).toBe(1);

    // A process restart: nothing is open, the worktree is on disk. The next attach reopens it as it is.
    forgetAttachedSandboxes();
    const reopened = await attachSandbox(request());
    expect(reads.n).toBe(2);
    expect(await reopened.readFile("left.txt")).toBe("left in the worktree\n");

    await releaseSandbox(request());
    expect(reads.n).toBe(2);
    // Gone: a release with nothing open and nothing on disk reads nothing either.
    await releaseSandbox(request());
    expect(reads.n).toBe(2);
  });
});
