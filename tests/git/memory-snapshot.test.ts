import { describe, expect, it } from "vitest";
import { MEMORY_SNAPSHOT_MAX_CHARS, readMemorySnapshot } from "@/lib/git";
import { commitAll, makeRepo, writeFiles } from "./helpers";

// The cached copy of memory.md that GET /api/projects shows (#32, finding 3): bounded and redacted.
describe("readMemorySnapshot", () => {
  it("is null without a memory.md, and the file's text with one", async () => {
    const repo = await makeRepo();
    expect(await readMemorySnapshot({ repoPath: repo, ref: "refs/heads/main" })).toBeNull();
    await writeFiles(repo, { ".autonomous/memory.md": "# Project memory\n\n## Past Decisions\n" });
    await commitAll(repo, "memory");
    expect(await readMemorySnapshot({ repoPath: repo, ref: "refs/heads/main" })).toBe("# Project memory\n\n## Past Decisions\n");
  });

  it("redacts a key someone committed into it, and cuts a long file with a note saying where the rest is", async () => {
    const repo = await makeRepo();
    const key = `ghp_${"a1B2c3D4e5".repeat(4)}`;
    await writeFiles(repo, { ".autonomous/memory.md": `token ${key}\n${"x".repeat(MEMORY_SNAPSHOT_MAX_CHARS * 2)}` });
    await commitAll(repo, "memory");
    const snapshot = (await readMemorySnapshot({ repoPath: repo, ref: "refs/heads/main" }))!;
    expect(snapshot).not.toContain(key);
    expect(snapshot.length).toBeLessThan(MEMORY_SNAPSHOT_MAX_CHARS + 200);
    expect(snapshot).toContain("the full file is .autonomous/memory.md on main");
  });
});
