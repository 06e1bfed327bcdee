import { describe, expect, it } from "vitest";
import { gitOut } from "@/lib/git/run";
import { mineHistory, type Candidate } from "@/scripts/eval/history";
import { testCommand } from "@/scripts/eval/tests-cmd";
import { buildHistoryFixture, FIXTURE_TEST_COMMAND, HIDDEN_MARKER } from "./history-fixture";

/** `npm run eval -- --from-history`: mining a repository's history for valid tasks (the SWE-bench rule), in the sandbox. */

describe("eval tasks mined from history", () => {
  it("keeps the commits whose tests fail at the parent and pass at the commit, and says why it dropped the others", { timeout: 120_000 }, async () => {
    const { dir, commits } = await buildHistoryFixture();
    const head = await gitOut(dir, ["rev-parse", "HEAD"]);
    const seen: Candidate[] = [];
    const candidates = await mineHistory({ repo: dir, testCommand: FIXTURE_TEST_COMMAND, onCandidate: (c) => seen.push(c) });
    expect(seen).toEqual(candidates);
    const by = (name: string) => candidates.find((c) => c.commit === commits[name])!;
    // Newest first, every commit of main decided once.
    expect(candidates.map((c) => c.commit)).toEqual(Object.values(commits).reverse());
    expect(candidates.filter((c) => c.valid).map((c) => c.commit)).toEqual([commits["add-greet"], commits["add-clamp"], commits["add-mul"]]);
    expect(by("break-sum").reason).toMatch(/^the other tests fail at the commit/);
    expect(by("add-div").reason).toMatch(/^its tests fail at the commit itself/);
    expect(by("refactor").reason).toBe("its tests already pass at the parent: they do not check the change");
    expect(by("sum-tests").reason).toBe("changes tests but no code");
    expect(by("docs").reason).toBe("changes no test files");
    expect(by("start").reason).toBe("the first commit: there is no parent to start from");

    const mul = by("add-mul").task!;
    expect(mul).toMatchObject({
      source: "history",
      repo: { path: dir, commit: commits["start"] },
      solution: commits["add-mul"],
      check: `(for f in 'test/mul.test.js'; do node "$f" || exit 1; done) && (for f in 'test/sum.test.js'; do node "$f" || exit 1; done)`,
    });
    expect(mul.id).toMatch(/^h-[0-9a-f]{8}-add-mul-a-b-the-product/);
    // The request is the commit message; the tests are withheld: they are hidden files, not in the request.
    expect(mul.request).toContain("Add mul(a, b)");
    expect(Object.keys(mul.hiddenFiles!)).toEqual(["test/mul.test.js"]);
    expect(mul.hiddenFiles!["test/mul.test.js"]).toContain(HIDDEN_MARKER);
    for (const c of candidates.filter((x) => x.valid)) expect(c.task!.request).not.toContain(HIDDEN_MARKER);
    // The mined repository was only read: same HEAD, clean, no worktrees left behind.
    expect(await gitOut(dir, ["rev-parse", "HEAD"])).toBe(head);
    expect(await gitOut(dir, ["status", "--porcelain"])).toBe("");
    expect((await gitOut(dir, ["worktree", "list"])).split("\n")).toHaveLength(1);
  });

  it("reads only the commits since a date and stops at --count valid tasks", { timeout: 60_000 }, async () => {
    const { dir, commits } = await buildHistoryFixture();
    const candidates = await mineHistory({ repo: dir, since: "2024-01-07T00:00:00Z", count: 1, testCommand: FIXTURE_TEST_COMMAND });
    expect(candidates.map((c) => [c.commit, c.valid])).toEqual([
      [commits["break-sum"], false],
      [commits["add-div"], false],
      [commits["add-greet"], true],
    ]);
  });

  it("runs tests by their kind unless a test command is given", () => {
    expect(testCommand(["test/a.test.js", "t/b_test.py::test_x", "t/c.test.sh"])).toBe(
      "node --test 'test/a.test.js' && python3 -m pytest -q 't/b_test.py::test_x' && sh 't/c.test.sh'",
    );
    expect(testCommand(["a b.test.ts"], "npx vitest run {tests}")).toBe("npx vitest run 'a b.test.ts'");
  });
});
