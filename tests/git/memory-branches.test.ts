import { describe, expect, it, vi } from "vitest";
import { readLatestMemory, updateMemory } from "@/lib/git";
import { git, makeRepo } from "../workflow/harness";

/**
 * A run's planning reads the project memory of every run branch (lib/git/memory.ts readLatestMemory). With a git process
 * per branch, a project with hundreds of runs made every planning spawn hundreds of processes one after another (the
 * deciding bench's runs sat in planning for minutes): the branches' memory files are read with one process instead.
 */

const spawned = vi.hoisted(() => ({ commands: [] as string[][] }));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("./spawn-record");
  return recordingSpawner(await importOriginal(), (request) => spawned.commands.push(commandOf(request)));
});

describe("the project memory of many run branches", () => {
  it("is read with a few git processes whatever the number of branches, every delivered run's decision included", { timeout: 120_000 }, async () => {
    const repo = makeRepo();
    const delivered: string[] = [];
    for (let i = 0; i < 12; i++) {
      const runId = `run_many${String(i).padStart(2, "0")}`;
      const branch = `autonomous/${runId}-x`;
      git(repo, "branch", branch, "main");
      // Non-ASCII text: the files are cut from git's output by their size in bytes.
      await updateMemory({ repoPath: repo, branch, runId, title: `Run ${i} — café`, outcome: "Delivered", decisions: [`chose ${i} ✓`], date: new Date(Date.UTC(2026, 0, 1 + i)) });
      delivered.push(runId);
    }
    // Runs not delivered yet: their branches carry the base's memory (here none).
    for (let i = 0; i < 30; i++) git(repo, "branch", `autonomous/run_waiting${String(i).padStart(2, "0")}-x`, "main");

    spawned.commands.length = 0;
    const seen = await readLatestMemory({ repoPath: repo, ref: "main" });
    expect(seen.pastDecisions.map((d) => d.runId)).toEqual(delivered);
    expect(seen.raw).toContain("chose 11 ✓");
    expect(seen.raw).toContain("Run 0 — café");
    // The base's memory, its stack learned from the tree, the branches listed, and their memory files: 42 branches,
    // not 42 processes.
    expect(spawned.commands.length).toBeLessThanOrEqual(6);
    expect(spawned.commands.filter((c) => c.includes("cat-file") && c.includes("--batch"))).toHaveLength(1);
  });
});
