import { describe, expect, it } from "vitest";
import { nextStep, type DeliveryRun } from "./delivery";

const run = (over: Partial<DeliveryRun> = {}): DeliveryRun => ({
  status: "completed",
  branch: "autonomous/run_1-add-x",
  merged: false,
  pullRequest: null,
  config: { git: { createPR: true, autoMerge: false, baseBranch: "main" } },
  ...over,
});
const local = { type: "local" as const, path: "/repo" };
const github = { type: "github" as const, owner: "acme", repo: "app" };

describe("nextStep", () => {
  it("says why a local project has no pull request and gives the merge command", () => {
    const step = nextStep({ run: run(), repository: local });
    expect(step).toMatchObject({ kind: "merge_locally", title: "PR not opened: local project" });
    expect(step?.kind === "merge_locally" && step.command).toContain("git merge --squash autonomous/run_1-add-x");
  });

  it("points at the open pull request when there is one", () => {
    const step = nextStep({ run: run({ pullRequest: { number: 7, url: "https://github.com/acme/app/pull/7", draft: false, state: "open" } }), repository: github });
    expect(step).toMatchObject({ kind: "review_pr", url: "https://github.com/acme/app/pull/7" });
  });

  it("offers to open a pull request on GitHub when the run opened none", () => {
    const step = nextStep({ run: run({ config: { git: { createPR: false, baseBranch: "develop" } } }), repository: github });
    expect(step).toMatchObject({ kind: "open_pr", detail: "PR not opened: pull requests were turned off for this run." });
    expect(step?.kind === "open_pr" && step.url).toBe("https://github.com/acme/app/compare/develop...autonomous%2Frun_1-add-x?expand=1");
  });

  it("reports a merge that happened, and nothing for a run that has not completed", () => {
    expect(nextStep({ run: run({ merged: true }), repository: local })).toMatchObject({ kind: "merged", title: "Merged into main" });
    expect(nextStep({ run: run({ status: "running" }), repository: local })).toBeNull();
  });
});
