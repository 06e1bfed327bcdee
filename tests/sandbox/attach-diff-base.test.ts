import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commitWorkInProgress, createRunBranch, restoreFilesToBase } from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import { attachSandbox, releaseSandbox } from "@/lib/sandbox";
import { makeRepo } from "../git/helpers";

/*
 * Validation diffs the run's work from the run's base (the scope check of #35 item 4 depends on it). A sandbox a step
 * attached without a diff base (implementation, after a gate) diffs from the commit it was attached at; a later
 * attach asking for the run's base must get that base, not the cached sandbox's.
 */

let repo: string;
const opened: Array<Parameters<typeof releaseSandbox>[0]> = [];

beforeAll(async () => {
  repo = await makeRepo();
});
afterAll(async () => {
  for (const o of opened) await releaseSandbox(o).catch(() => {});
});

describe("a run sandbox's diff base", () => {
  it("an attach asking for the run's base diffs from it, though the sandbox was attached earlier at a later commit", async () => {
    const runId = "run_attachbase01";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "attach base", baseBranch: "main" });
    const base = await gitOut(repo, ["rev-parse", branch]);
    const options = { runId, repoPath: repo, ref: branch, branch, kind: "local" as const };
    opened.push(options);
    const first = await attachSandbox(options);
    await first.writeFile("extra.txt", "extra\n");
    await commitWorkInProgress({ sandbox: first, runId, reason: "approval" });
    await releaseSandbox(options);

    // Attached again after the wait (as implementation does): its own diff starts at the committed work.
    const later = await attachSandbox(options);
    expect(await later.diff()).not.toContain("extra.txt");
    // Validation asks for the run's base: the committed extra.txt is in its diff.
    const validation = await attachSandbox({ ...options, diffBase: base });
    expect(await validation.diff()).toContain("extra.txt");
  });

  it("restoreFilesToBase takes back a new file and a changed one in one commit", async () => {
    const runId = "run_attachbase02";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "take back", baseBranch: "main" });
    const base = await gitOut(repo, ["rev-parse", branch]);
    const options = { runId, repoPath: repo, ref: branch, branch, kind: "local" as const };
    opened.push(options);
    const s = await attachSandbox({ ...options, diffBase: base });
    const readme = await s.readFile("README.md");
    await s.writeFile("extra.txt", "extra\n");
    await s.writeFile("README.md", "changed\n");
    await s.writeFile("kept.txt", "kept\n");
    await commitWorkInProgress({ sandbox: s, runId, reason: "work" });
    const commit = await restoreFilesToBase({ sandbox: s, runId, base, files: ["extra.txt", "README.md"], reason: "Out of scope." });
    expect(await gitOut(repo, ["rev-parse", branch])).toBe(commit.sha);
    expect(await gitOut(repo, ["diff", "--name-status", `${base}`, branch])).toBe("A\tkept.txt");
    expect(await gitOut(repo, ["log", "-1", "--format=%s", branch])).toBe(`Out-of-scope changes taken back (run ${runId})`);
    expect(await s.readFile("README.md")).toBe(readme);
    await expect(s.readFile("extra.txt")).rejects.toMatchObject({ code: "not_found:sandbox" });
  });
});
