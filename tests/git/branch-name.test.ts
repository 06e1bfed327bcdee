import { describe, expect, it } from "vitest";
import { branchNameFor } from "@/lib/db/queries/runs";
import { createRunBranch } from "@/lib/git";
import { resolveCommit } from "@/lib/git/run";
import { requestSlug } from "@/lib/ids";
import { makeRepo } from "./helpers";

// #32 finding 9: branch names were cut mid-word and built from the demo model's markers.
describe("a new run's branch name", () => {
  it("is made of whole words of the request, without a file block (was …-add-a-greeting-module-with-a-gre)", () => {
    const request = "Add a greeting module with a greeting function\n\n```file:src/greeting.js\nexport const hi = 1;\n```\n";
    expect(branchNameFor({ runId: "run_01", request })).toBe("autonomous/run_01-add-a-greeting-module-with-a-greeting");
  });

  it("leaves the demo markers out (was …-add-a-greeting-ask-which-languag)", () => {
    const request = "Add a greeting [ask: Which languages? | en | de] [run: node -e \"process.exit(0)\"] [fail-validation: 1]";
    expect(branchNameFor({ runId: "run_02", request })).toBe("autonomous/run_02-add-a-greeting");
    expect(requestSlug("[plan-ask: Which tone?] [check: npm test] [invalid-mermaid: 2] Add docs")).toBe("add-docs");
  });

  it("never ends in part of a word, and stays within its maximum", () => {
    const slug = requestSlug("Refactor the configuration loader so that environment variables override files");
    expect(slug).toBe("refactor-the-configuration-loader-so");
    expect(slug.length).toBeLessThanOrEqual(40);
    expect(requestSlug("a".repeat(60))).toBe("a".repeat(40));
    expect(requestSlug("[ask: only a marker]")).toBe("request");
  });

  it("of an existing run is the stored one: the branch step does not derive it from the request again", async () => {
    const repo = await makeRepo({ "README.md": "# demo\n" });
    const stored = "autonomous/run_03-named-by-an-older-version";
    const { branch } = await createRunBranch({ repoPath: repo, runId: "run_03", request: "Add a greeting [ask: Which languages?]", branch: stored, baseBranch: "main" });
    expect(branch).toBe(stored);
    expect(await resolveCommit(repo, `refs/heads/${stored}`)).toBeTruthy();
  });
});
