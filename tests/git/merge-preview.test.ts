import { describe, expect, it } from "vitest";
import { squashMerge } from "@/lib/git";
import { squashMergePreview } from "@/lib/git/merge-preview";
import { git, gitOut } from "@/lib/git/run";
import { commitAll, makeRepo, writeFiles } from "./helpers";

/** Issue 32, finding 4: "Merge into main" shows what will land — every file of the squash commit — before it merges. */
describe("squashMergePreview", () => {
  it("lists every file the squash commit lands, the .autonomous/ records too, with line counts, and changes nothing", async () => {
    const repo = await makeRepo();
    await git(repo, ["checkout", "-q", "-b", "run-branch"]);
    await writeFiles(repo, {
      "src/greet.ts": "export const greet = () => 'hi';\n",
      ".autonomous/runs/run_1/context.json": "{\n  \"runId\": \"run_1\"\n}\n",
      ".autonomous/specs/001-greet.md": "# Greet\n\n- T1\n",
    });
    await commitAll(repo, "run work");
    await git(repo, ["checkout", "-q", "main"]);
    const mainBefore = await gitOut(repo, ["rev-parse", "main"]);

    const preview = await squashMergePreview({ repoPath: repo, branch: "run-branch", baseBranch: "main" });
    expect(preview.status).toBe("ready");
    expect(preview.files).toEqual([
      { path: ".autonomous/runs/run_1/context.json", added: 3, removed: 0 },
      { path: ".autonomous/specs/001-greet.md", added: 3, removed: 0 },
      { path: "src/greet.ts", added: 1, removed: 0 },
    ]);
    expect(await gitOut(repo, ["rev-parse", "main"])).toBe(mainBefore);

    // The preview is what the merge then lands.
    const merged = await squashMerge({ repoPath: repo, branch: "run-branch", baseBranch: "main", runId: "run_1", title: "Greet" });
    expect(merged.status).toBe("merged");
    const landed = (await gitOut(repo, ["diff", "--name-only", mainBefore, "main"])).split("\n");
    expect(landed).toEqual(preview.files.map((f) => f.path));
    expect(await squashMergePreview({ repoPath: repo, branch: "run-branch", baseBranch: "main" })).toEqual({ status: "up_to_date", files: [] });
  });

  it("a conflicting base is reported with its files; a missing branch says which", async () => {
    const repo = await makeRepo();
    await git(repo, ["checkout", "-q", "-b", "run-branch"]);
    await writeFiles(repo, { "src/app.ts": "export const a = 2;\n" });
    await commitAll(repo, "run work");
    await git(repo, ["checkout", "-q", "main"]);
    await writeFiles(repo, { "src/app.ts": "export const a = 3;\n" });
    await commitAll(repo, "someone else");
    expect(await squashMergePreview({ repoPath: repo, branch: "run-branch", baseBranch: "main" })).toMatchObject({
      status: "conflict",
      files: [{ path: "src/app.ts" }],
    });
    expect(await squashMergePreview({ repoPath: repo, branch: "nope", baseBranch: "main" })).toEqual({
      status: "missing",
      files: [],
      reason: "Branch nope does not exist.",
    });
  });
});
