import fs from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db";
import { git, gitOut } from "@/lib/git/run";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Octokit } from "@octokit/core";
import { mineHistory, type Candidate } from "@/scripts/eval/history";
import { mergedPullRequests } from "@/scripts/eval/pulls";
import { runEval } from "@/scripts/eval/run";
import { buildReport } from "@/scripts/eval/report";
import { testCommand } from "@/scripts/eval/tests-cmd";
import { buildHistoryFixture, FIXTURE_TEST_COMMAND, HIDDEN_MARKER } from "./history-fixture";

/** `npm run eval -- --from-history`: mining a repository's history for valid tasks (the SWE-bench rule), in the sandbox. */

const DEMO = { name: "demo", planner: "demo:default", implementer: "demo:default", validator: "demo:default" };

describe("eval tasks mined from history", () => {
  let dir: string;
  let commits: Record<string, string>;
  let head: string;
  let candidates: Candidate[];
  const seen: Candidate[] = [];
  // Mined once (every commit of the fixture), used by the mining test and the full round.
  beforeAll(async () => {
    ({ dir, commits } = await buildHistoryFixture());
    head = await gitOut(dir, ["rev-parse", "HEAD"]);
    candidates = await mineHistory({ repo: dir, testCommand: FIXTURE_TEST_COMMAND, onCandidate: (c) => seen.push(c) });
  }, 120_000);

  it("keeps the commits whose tests fail at the parent and pass at the commit, and says why it dropped the others", async () => {
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
    expect(candidates.filter((c) => c.valid)).toHaveLength(3);
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

  it("runs the mined tasks through the real workflow: the demo solves the two it is scripted for, and never sees the withheld tests", { timeout: 180_000 }, async () => {
    const tasks = candidates.filter((c) => c.valid).map((c) => c.task!);
    const results = await runEval({ tasks, routing: DEMO, timeoutMs: 120_000, concurrency: 3 });
    const by = (name: string) => results.find((r) => r.commit === commits[name])!;
    expect(by("add-mul")).toMatchObject({ source: "history", status: "completed", solved: true });
    expect(by("add-greet")).toMatchObject({ source: "history", status: "completed", solved: true });
    // clamp's request carries no file block: the demo writes only its note, and the hidden tests say so.
    expect(by("add-clamp")).toMatchObject({ status: "completed", solved: false });
    expect(by("add-clamp").checkOutput).toMatch(/Cannot find module '\.\.\/clamp\.js'/);

    const dropped = candidates.filter((c) => !c.valid).map((c) => ({ id: `h-${c.commit.slice(0, 8)}`, source: "history" as const, commit: c.commit, reason: c.reason! }));
    const report = buildReport({ tasks, runs: [{ routing: DEMO, results }], dropped });
    expect(report.routings).toEqual([expect.objectContaining({ name: "demo", tasks: 3, solved: 2, interventions: 0 })]);
    expect(report.tasks).toHaveLength(9);
    expect(report.tasks.filter((t) => !t.valid)).toHaveLength(6);
    expect(report.tasks.find((t) => t.commit === commits["add-mul"])).toMatchObject({ source: "history", valid: true, solved: true, routing: "demo" });
    expect(report.demo).toMatch(/scripted, not AI: it solves only tasks whose request carries its file blocks — 2 of 3 here/);

    // Safe: the withheld tests reach neither the agent's repository (any branch, any commit, any file on disk) nor what
    // the run stored. (Tests older than the task's commit are part of its parent and may be seen; the hidden ones not.)
    for (const r of results) {
      const task = tasks.find((t) => t.id === r.task)!;
      const revs = (await gitOut(r.repoPath, ["rev-list", "--all"])).split("\n");
      expect(revs.length).toBeGreaterThanOrEqual(2); // the snapshot and the delivered branch's commits
      for (const [file, content] of Object.entries(task.hiddenFiles!)) {
        const marker = content.split("\n")[0]!; // "// HIDDEN-TEST-7f3a <name>"
        expect(marker).toContain(HIDDEN_MARKER);
        expect((await git(r.repoPath, ["grep", "-q", "-F", marker, ...revs], { allowFailure: true })).code).toBe(1);
        expect((await git(r.repoPath, ["grep", "-q", "-F", "--untracked", marker], { allowFailure: true })).code).toBe(1);
        expect(fs.existsSync(path.join(r.repoPath, file))).toBe(false);
        expect(task.request).not.toContain(marker);
      }
    }
    closeDb();
    const dbFiles = fs.readdirSync(process.env.GATEHOUSE_DATA_DIR!).filter((f) => f.startsWith("test.db"));
    const stored = Buffer.concat(dbFiles.map((f) => fs.readFileSync(path.join(process.env.GATEHOUSE_DATA_DIR!, f))));
    expect(stored.includes("Add clamp(x, lo, hi)")).toBe(true); // the requests are stored in plain text...
    expect(stored.includes(`${HIDDEN_MARKER} greet`)).toBe(false); // ...the newest hidden test (in no task's repository) is not
  });

  it("reads only the commits since a date and stops at --count valid tasks", { timeout: 60_000 }, async () => {
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

  it("mines a GitHub project's merged pull requests (listed from the API), the request being the title and body", { timeout: 60_000 }, async () => {
    const queries: string[] = [];
    const pulls = [
      { number: 14, title: "Add div", body: null, merged_at: "2024-01-09T00:00:00Z", merge_commit_sha: "f".repeat(40) },
      { number: 13, title: "Draft", body: "never merged", merged_at: null, merge_commit_sha: "e".repeat(40) },
      { number: 12, title: "Greet people", body: "Add greet(name) in greet.js.", merged_at: "2024-01-07T00:00:00Z", merge_commit_sha: commits["add-greet"] },
      { number: 2, title: "Old", body: "", merged_at: "2023-06-01T00:00:00Z", merge_commit_sha: commits["add-mul"] },
    ];
    // A local receiver standing in for the GitHub API.
    const server = http.createServer((req, res) => {
      queries.push(req.url!);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(req.url!.startsWith("/repos/acme/mathlib/pulls?") ? pulls : []));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const client = new Octokit({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
      const prs = await mergedPullRequests({ client, owner: "acme", repo: "mathlib", base: "main", since: "2024-01-01" });
      expect(queries[0]).toMatch(/^\/repos\/acme\/mathlib\/pulls\?/);
      expect(new URLSearchParams(queries[0]!.split("?")[1]).get("state")).toBe("closed");
      expect(new URLSearchParams(queries[0]!.split("?")[1]).get("base")).toBe("main");
      expect(prs.map((p) => p.number)).toEqual([14, 12]);

      const mined = await mineHistory({ repo: dir, pullRequests: prs, count: 1, testCommand: FIXTURE_TEST_COMMAND });
      expect(mined.map((c) => [c.valid, c.reason])).toEqual([
        [false, "pull request #14's merge commit is not in the repository (fetch it)"],
        [true, null],
      ]);
      expect(mined[1]!.task).toMatchObject({
        id: "pr-12-greet-people",
        source: "history",
        solution: commits["add-greet"],
        repo: { path: dir, commit: commits["refactor"] },
        request: "Greet people\n\nAdd greet(name) in greet.js.",
      });
    } finally {
      server.close();
    }
  });
});
