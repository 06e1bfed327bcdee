import { describe, expect, it } from "vitest";
import { branchNameFor } from "@/lib/db/queries/runs";
import { taskBranchName } from "@/lib/git/task-branch";
import { newId, stableId } from "@/lib/ids";
import { redact } from "@/lib/redact";

/*
 * A run's branch name passes the redaction filter on its way into the log (BRANCH_CREATED), so a name the filter would
 * rewrite breaks the run: found in CI, where an eval run's id ended in "3sk" and `…3sk-add-a-greeting…` read as an
 * OpenAI key; the stored branch became `autonomous/run_…[REDACTED:openai-key]` and the run failed with "Branch … does
 * not exist".
 */

describe("a run's branch name is never rewritten by redaction", () => {
  it("the branch of a run id ending in `sk` is the id alone, and survives the filter", () => {
    const runId = "run_01m8e7k322famrzy4zpzwfp3sk";
    const request = "Add a greeting function to greet.js";
    expect(redact(`autonomous/${runId}-add-a-greeting-function-to-greet-js`)).toContain("[REDACTED");
    const branch = branchNameFor({ runId, request });
    expect(branch).toBe(`autonomous/${runId}`);
    expect(redact(branch)).toBe(branch);
  });

  it("an ordinary run keeps its slug", () => {
    const branch = branchNameFor({ runId: "run_01m8e7k322famrzy4zpzwfp3ab", request: "Add a greeting function" });
    expect(branch).toBe("autonomous/run_01m8e7k322famrzy4zpzwfp3ab-add-a-greeting-function");
  });

  it("new run ids never end in `sk` (about 1 in 1,024 would), webhook runs' stable ids neither; other ids are left as drawn", () => {
    const ids = Array.from({ length: 30_000 }, () => newId("run"));
    expect(ids.filter((id) => id.endsWith("sk"))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    const stable = Array.from({ length: 10_000 }, (_, i) => stableId("run", { key: `github-delivery:d${i}:0`, time: 1_700_000_000_000 }));
    expect(stable.filter((id) => id.endsWith("sk"))).toEqual([]);
    // Still the same id every time for the same key.
    expect(stableId("run", { key: "github-delivery:d7:0", time: 1_700_000_000_000 })).toBe(stable[7]);
    // Every run id's branch survives the filter.
    for (const id of ids.slice(0, 2_000)) expect(redact(branchNameFor({ runId: id, request: "Add a greeting function to greet.js" }))).toBe(branchNameFor({ runId: id, request: "Add a greeting function to greet.js" }));
  });

  it("a task's branch too: a run branch ending in `9sk` followed by a long task id gets a short, stable name instead", () => {
    const runBranch = branchNameFor({ runId: "run_01m8e7k322famrzy4zpzwfp3ab", request: "Fix the parser for 9sk" });
    expect(runBranch).toBe("autonomous/run_01m8e7k322famrzy4zpzwfp3ab-fix-the-parser-for-9sk");
    const taskId = "T1-write-the-long-greeting";
    expect(redact(`${runBranch}--${taskId}`)).toContain("[REDACTED");
    const branch = taskBranchName(runBranch, taskId);
    expect(branch).toMatch(/^autonomous\/run_01m8e7k322famrzy4zpzwfp3ab-fix-the-parser-for-9sk--t[0-9a-f]{8}$/);
    expect(redact(branch)).toBe(branch);
    expect(taskBranchName(runBranch, taskId)).toBe(branch);
    expect(taskBranchName(runBranch, "T2-write-the-long-greeting")).not.toBe(branch);
    // A task id that completes no key's shape keeps its readable name.
    expect(taskBranchName(runBranch, "T1")).toBe(`${runBranch}--T1`);
  });
});
