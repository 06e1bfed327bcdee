import fs from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { readFileAt } from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import { commitAll, makeRepo, writeFiles } from "./helpers";

/**
 * readFileAt at a commit named by its full id is read once and then served from memory (a commit's files never
 * change; every turn of every parallel task reads the same instructions at the run's base commit), while a read at a
 * branch name always asks git (the branch moves).
 */
describe("reading a file at a commit", () => {
  it("a full commit id's file (or its absence) is read once; a branch's is read again each time", async () => {
    const repo = await makeRepo({ "AGENTS.md": "first\n" });
    const sha = await gitOut(repo, ["rev-parse", "HEAD"]);
    expect(await readFileAt({ repoPath: repo, ref: sha, path: "AGENTS.md" })).toBe("first\n");
    expect(await readFileAt({ repoPath: repo, ref: sha, path: "CLAUDE.md" })).toBeNull();
    await writeFiles(repo, { "AGENTS.md": "second\n" });
    await commitAll(repo, "moved on");
    expect(await readFileAt({ repoPath: repo, ref: "main", path: "AGENTS.md" })).toBe("second\n");

    // With the repository gone, git can read nothing: the commit's file still comes back from memory, the branch's not.
    const away = `${repo}-away.git`;
    await fs.rename(`${repo}/.git`, away);
    try {
      expect(await readFileAt({ repoPath: repo, ref: sha, path: "AGENTS.md" })).toBe("first\n");
      expect(await readFileAt({ repoPath: repo, ref: sha, path: "CLAUDE.md" })).toBeNull();
      expect(await readFileAt({ repoPath: repo, ref: "main", path: "AGENTS.md" })).toBeNull();
      // A commit git could not read is not remembered as missing a file.
      const unknown = "0".repeat(40);
      expect(await readFileAt({ repoPath: repo, ref: unknown, path: "AGENTS.md" })).toBeNull();
    } finally {
      await fs.rename(away, `${repo}/.git`);
    }
    expect(await readFileAt({ repoPath: repo, ref: "main", path: "AGENTS.md" })).toBe("second\n");
  });
});
