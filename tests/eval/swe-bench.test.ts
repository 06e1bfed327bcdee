import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { git } from "@/lib/git/run";
import { importSweBench } from "@/scripts/eval/swe-bench";
import { checkInSandbox } from "@/scripts/eval/checkout";
import { buildHistoryFixture, FIXTURE_TEST_COMMAND, HIDDEN_MARKER } from "./history-fixture";

/** `npm run eval -- --swe-bench file.jsonl`: SWE-bench instances for repositories on this machine, nothing downloaded. */

describe("SWE-bench import", () => {
  it("imports the instances whose repository is local and whose FAIL_TO_PASS fails at the base, and says why it dropped the rest", { timeout: 90_000 }, async () => {
    const { dir, commits } = await buildHistoryFixture();
    const diff = async (from: string, to: string, file: string) => (await git(dir, ["diff", from, to, "--", file])).stdout;
    // The repository as SWE-bench names it (owner/name), found under --repos-dir as owner__name.
    const reposDir = fs.mkdtempSync(path.join(os.tmpdir(), "gh-swe-repos-"));
    fs.symlinkSync(dir, path.join(reposDir, "acme__mathlib"));
    const instances = [
      {
        instance_id: "acme__mathlib-4",
        repo: "acme/mathlib",
        base_commit: commits["docs"],
        problem_statement: "clamp(x, lo, hi) is missing: add it in clamp.js.",
        test_patch: await diff(commits["docs"]!, commits["add-clamp"]!, "test/clamp.test.js"),
        FAIL_TO_PASS: JSON.stringify(["test/clamp.test.js"]),
        PASS_TO_PASS: ["test/sum.test.js", "test/mul.test.js"],
      },
      { instance_id: "octo__gone-1", repo: "octo/gone", base_commit: commits["docs"], problem_statement: "x", test_patch: "y", FAIL_TO_PASS: ["t.js"], PASS_TO_PASS: [] },
      {
        instance_id: "acme__mathlib-6",
        repo: dir,
        base_commit: commits["sum-tests"],
        problem_statement: "Name sum's arguments.",
        test_patch: await diff(commits["sum-tests"]!, commits["refactor"]!, "test/sum-more.test.js"),
        FAIL_TO_PASS: ["test/sum-more.test.js"],
        PASS_TO_PASS: [],
      },
      {
        instance_id: "acme__mathlib-9",
        repo: dir,
        base_commit: commits["start"],
        problem_statement: "x",
        test_patch: (await diff(commits["start"]!, commits["sum-tests"]!, "test/sum.test.js")).replace("sum(2, 3), 5));", "sum(7, 7), 14));"),
        FAIL_TO_PASS: ["test/sum.test.js"],
        PASS_TO_PASS: [],
      },
    ];
    const file = path.join(reposDir, "instances.jsonl");
    fs.writeFileSync(file, `${instances.map((i) => JSON.stringify(i)).join("\n")}\n`);

    const { tasks, dropped } = await importSweBench({ file, reposDir, testCommand: FIXTURE_TEST_COMMAND });
    expect(dropped).toEqual([
      { id: "swe-octo-gone-1", source: "swe-bench", commit: commits["docs"], reason: `repository octo/gone is not available locally under ${reposDir}` },
      { id: "swe-acme-mathlib-6", source: "swe-bench", commit: commits["sum-tests"], reason: "its FAIL_TO_PASS tests already pass at base_commit" },
      { id: "swe-acme-mathlib-9", source: "swe-bench", commit: commits["start"], reason: "test_patch does not apply to test/sum.test.js at base_commit" },
    ]);
    expect(tasks).toHaveLength(1);
    const task = tasks[0]!;
    expect(task).toMatchObject({
      id: "swe-acme-mathlib-4",
      source: "swe-bench",
      repo: { path: path.join(reposDir, "acme__mathlib"), commit: commits["docs"] },
      request: "clamp(x, lo, hi) is missing: add it in clamp.js.",
    });
    // The test patch became the hidden file; the check runs FAIL_TO_PASS, then PASS_TO_PASS.
    expect(Object.keys(task.hiddenFiles!)).toEqual(["test/clamp.test.js"]);
    expect(task.hiddenFiles!["test/clamp.test.js"]).toContain(`${HIDDEN_MARKER} clamp`);
    expect(task.check).toBe(
      `(for f in 'test/clamp.test.js'; do node "$f" || exit 1; done) && (for f in 'test/sum.test.js' 'test/mul.test.js'; do node "$f" || exit 1; done)`,
    );
    // The gold change (the add-clamp commit) passes the check; the base does not.
    expect((await checkInSandbox({ repoPath: dir, ref: commits["add-clamp"]!, command: task.check, hiddenFiles: task.hiddenFiles })).passed).toBe(true);
    expect((await checkInSandbox({ repoPath: dir, ref: commits["docs"]!, command: task.check, hiddenFiles: task.hiddenFiles })).passed).toBe(false);
  });

  it("refuses a malformed line, naming the line and the field", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gh-swe-")), "bad.jsonl");
    fs.writeFileSync(file, `\n${JSON.stringify({ instance_id: "a", repo: "o/r", base_commit: "abc1234", problem_statement: "p", test_patch: "t", FAIL_TO_PASS: "not json" })}\n`);
    await expect(importSweBench({ file })).rejects.toThrow(/bad\.jsonl:2: FAIL_TO_PASS: must be a list of test ids/);
  });
});
