import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commitWorkInProgress, createRunBranch, workspaceTree } from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import { createSandbox, restoreSandbox, type RunSandbox } from "@/lib/sandbox";
import { makeRepo } from "../git/helpers";

let repo: string;
const live: RunSandbox[] = [];

beforeAll(async () => {
  repo = await makeRepo();
});
afterAll(async () => {
  for (const s of live) await s.destroy().catch(() => {});
});

describe("pause and resume", () => {
  it("a WIP commit before a pause and a restore after it leave the same tree hash", async () => {
    const runId = "run_wip01";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "pause me", baseBranch: "main" });
    const first = await createSandbox({ runId, repoPath: repo, ref: branch, branch, kind: "local" });
    await first.writeFile("src/feature.ts", "export const half = true;\n");
    await first.writeFile("notes/todo.md", "- finish\n");
    await first.exec("rm", ["README.md"]);
    const before = await workspaceTree(first);
    const wip = await commitWorkInProgress({ sandbox: first, runId, reason: "clarification" });
    expect(wip.tree).toBe(before);
    expect(await gitOut(repo, ["log", "-1", "--format=%s", branch])).toBe(`WIP before pause: clarification (run ${runId})`);
    await first.destroy();

    const restored = await restoreSandbox({ runId, repoPath: repo, branch, expectedTree: wip.tree, kind: "local" });
    live.push(restored);
    expect(await workspaceTree(restored)).toBe(wip.tree);
    expect(await restored.readFile("src/feature.ts")).toBe("export const half = true;\n");
    await expect(restored.readFile("README.md")).rejects.toMatchObject({ code: "not_found:sandbox" });
  });

  it("a restore whose tree does not match the paused one is refused", async () => {
    const runId = "run_wip02";
    const { branch } = await createRunBranch({ repoPath: repo, runId, request: "mismatch", baseBranch: "main" });
    const s = await createSandbox({ runId, repoPath: repo, ref: branch, branch, kind: "local" });
    await s.writeFile("a.txt", "a");
    const wip = await commitWorkInProgress({ sandbox: s, runId, reason: "approval" });
    await s.writeFile("a.txt", "changed after the pause");
    await s.exec("git", ["--version"]);
    const other = await commitWorkInProgress({ sandbox: s, runId, reason: "again" });
    await s.destroy();
    expect(other.tree).not.toBe(wip.tree);
    await expect(restoreSandbox({ runId, repoPath: repo, branch, expectedTree: wip.tree, kind: "local" })).rejects.toMatchObject({ code: "conflict:sandbox" });
  });
});
