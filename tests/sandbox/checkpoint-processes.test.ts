import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { commitCheckpoint } from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import { createSandbox, type RunSandbox } from "@/lib/sandbox";
import { makeRepo } from "../git/helpers";

/**
 * A task checkpoint (lib/git/checkpoint.ts) is committed on every session's turn that finishes a task and on its
 * closing turn — with parallel tasks, twice per task on its lane's critical path. The commit and its tree are read with
 * one git process (they were two, one after another).
 */

const seen = vi.hoisted(() => ({ on: false, gits: [] as string[][] }));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("../git/spawn-record");
  return recordingSpawner(await importOriginal(), (request) => {
    if (seen.on && request.file === "git") seen.gits.push(commandOf(request).slice(1));
  });
});

const sandboxes: RunSandbox[] = [];
afterAll(async () => {
  for (const s of sandboxes) await s.destroy();
});

describe("a task checkpoint", () => {
  it("reads the new commit and its tree with one git process, and returns both as git has them", async () => {
    const repo = await makeRepo();
    const sandbox = await createSandbox({ runId: `run_checkpoint_${Date.now()}`, repoPath: repo, ref: "main", branch: "checkpoint-test", kind: "local", isolation: "none" });
    sandboxes.push(sandbox);
    await fs.writeFile(path.join(sandbox.workspacePath!, "one.txt"), "one\n");
    seen.on = true;
    const checkpoint = await commitCheckpoint({ sandbox, runId: "run_checkpoint", taskId: "T1", title: "Write one" });
    seen.on = false;
    expect(checkpoint.sha).toBe(await gitOut(repo, ["rev-parse", "refs/heads/checkpoint-test"]));
    expect(checkpoint.tree).toBe(await gitOut(repo, ["rev-parse", "refs/heads/checkpoint-test^{tree}"]));
    expect(await gitOut(repo, ["show", "checkpoint-test:one.txt"])).toBe("one");
    const reads = seen.gits.filter((args) => args.includes("rev-parse"));
    expect(reads).toHaveLength(1);
    // git add, the gitlink look (ls-files), the commit, the read: four (was five).
    expect(seen.gits).toHaveLength(4);
  });
});
