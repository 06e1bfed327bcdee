import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { loadTasks } from "@/scripts/eval/run";
import { buildHistoryFixture, FIXTURE_TEST_COMMAND } from "./history-fixture";

/** The command line: `npm run eval -- --from-history … --out dir --mine-only` prints each candidate's fate and writes the tasks. */

const ROOT = path.resolve(import.meta.dirname, "../..");

describe("npm run eval --from-history (command line)", () => {
  it("prints why each candidate was dropped and writes the kept tasks in the task format", { timeout: 120_000 }, async () => {
    const { dir, commits } = await buildHistoryFixture();
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "gh-eval-out-"));
    const { stdout } = await promisify(execFile)(
      path.join(ROOT, "node_modules/.bin/tsx"),
      ["scripts/eval.ts", "--from-history", dir, "--since", "2024-01-07T00:00:00Z", "--count", "1", "--test-command", FIXTURE_TEST_COMMAND, "--out", out, "--mine-only"],
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH, TMPDIR: os.tmpdir(), NODE_ENV: "test", GATEHOUSE_DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), "gh-eval-data-")) },
        timeout: 110_000,
      },
    );
    expect(stdout).toContain(`dropped ${commits["break-sum"]!.slice(0, 8)} Add neg(x), and break sum on the way — the other tests fail at the commit:`);
    expect(stdout).toMatch(new RegExp(`dropped ${commits["add-div"]!.slice(0, 8)} Add div\\(a, b\\) — its tests fail at the commit itself: not ok 1 - div · Expected values to be strictly equal: · 18 !== 2`));
    expect(stdout).toContain(`kept    ${commits["add-greet"]!.slice(0, 8)} Add greet(name)`);
    expect(stdout).toContain("1 valid tasks of 3 candidates");
    const tasks = loadTasks(out);
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({ source: "history", solution: commits["add-greet"], repo: { path: fs.realpathSync(dir), commit: commits["refactor"] } });
  });
});
