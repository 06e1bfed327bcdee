import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { commitFiles, parseMemory, readLatestMemory, updateMemory } from "@/lib/git";
import { MEMORY_DECISIONS_MAX_CHARS } from "@/lib/git/memory";
import { fileBlock, git, launch, makeRepo, newProject, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

/**
 * Item 7 of #35: .autonomous/memory.md as the design writes it — front matter (project, techStack, patterns) learned
 * from the repository and from runs, a person's edit kept, and every delivered run's decisions given to a run.
 */

const h = useWorkflowHarness();

function nextRepo(): string {
  const repo = makeRepo();
  const files: Record<string, string> = {
    "package.json": JSON.stringify({ name: "shop", scripts: { test: "vitest run" }, dependencies: { next: "16.0.0", react: "19.0.0" }, devDependencies: { typescript: "5.9.0", vitest: "4.0.0" } }),
    "package-lock.json": "{}",
    "app/page.tsx": "export default function Page() { return null; }\n",
    "lib/cart.ts": "export const cart = [];\n",
    "tests/cart.test.ts": "import { it } from 'vitest'; it('x', () => {});\n",
  };
  for (const [p, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(repo, p)), { recursive: true });
    fs.writeFileSync(path.join(repo, p), content);
  }
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "shop");
  return repo;
}

const memoryOn = (repo: string, ref: string) => parseMemory(git(repo, "show", `${ref}:.autonomous/memory.md`));

describe("project memory learns the stack and patterns, keeps a person's edit, and gives a run every delivered run's decisions", () => {
  it("learned from the repository and from what a run added; an edit on the base is kept by the next run; unmerged runs are all read", { timeout: 240_000 }, async () => {
    const { project, repo } = await newProject(h.user, nextRepo());
    const noMerge = { trustMode: { planning: "auto" }, git: { autoMerge: false } };
    // The first run adds a components/ folder: a pattern learned from the run, not from the base.
    const first = await launch(h.user, project.id, `Add the orders table\n${fileBlock("components/orders.tsx", "export function Orders() { return null; }")}`, noMerge);
    expect((await waitForStatus(first.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(first.id);
    const learned = memoryOn(repo, first.branch!);
    expect(learned.techStack).toEqual(["Node.js", "Next.js", "React", "TypeScript", "Vitest", "npm"]);
    expect(learned.patterns).toEqual(
      expect.arrayContaining(["Next.js App Router: pages and route handlers in app/", "Shared code in lib/", "Tests in tests/", "Test with `npm test`", "UI components in components/"]),
    );
    expect(learned.pastDecisions.map((d) => d.runId)).toEqual([first.id]);

    // A person edits the memory on main: drops React, rewords Vitest, adds a pattern of their own.
    const edited = {
      ...learned,
      techStack: ["Node.js", "Next.js", "TypeScript", "Vitest 4 (unit tests)", "npm"],
      patterns: [...learned.patterns, "Money is stored in cents"],
      pastDecisions: [],
    };
    const { renderMemory } = await import("@/lib/git");
    await commitFiles({ repoPath: repo, branch: "main", files: { ".autonomous/memory.md": renderMemory(edited) }, message: "Edit memory by hand" });
    git(repo, "reset", "-q", "--hard", "main");

    // The second run adds an e2e/ folder: newly learned, so added; what the person removed or reworded stays so.
    const second = await launch(h.user, project.id, `Add a smoke test\n${fileBlock("e2e/smoke.spec.ts", "export {};")}`, noMerge);
    expect((await waitForStatus(second.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(second.id);
    const kept = memoryOn(repo, second.branch!);
    expect(kept.techStack).toEqual(["Node.js", "Next.js", "TypeScript", "Vitest 4 (unit tests)", "npm"]);
    expect(kept.patterns).toContain("Money is stored in cents");
    expect(kept.patterns).toContain("End-to-end tests in e2e/");
    expect(kept.patterns.filter((p) => p === "UI components in components/")).toHaveLength(1);

    // Neither run was merged: a third run (reading from main) is given both runs' decisions, not only the newest.
    const seen = await readLatestMemory({ repoPath: repo, ref: "main" });
    expect(seen.pastDecisions.map((d) => d.runId).sort()).toEqual([first.id, second.id].sort());
    expect(seen.raw).toContain("Add the orders table");
    expect(seen.raw).toContain("Add a smoke test");
  });

  it("a run is given the decisions of every delivered run within a bounded size, the newest kept, the rest counted", async () => {
    const repo = makeRepo();
    const runs: string[] = [];
    for (let i = 0; i < 20; i++) {
      const runId = `run_bound${String(i).padStart(2, "0")}`;
      const branch = `autonomous/${runId}-x`;
      git(repo, "branch", branch, "main");
      await updateMemory({
        repoPath: repo,
        branch,
        runId,
        title: `Run ${i}`,
        outcome: "Delivered",
        decisions: ["x".repeat(2_500)],
        date: new Date(Date.UTC(2026, 0, 1 + i)),
      });
      runs.push(runId);
    }
    const seen = await readLatestMemory({ repoPath: repo, ref: "main" });
    const size = seen.pastDecisions.reduce((n, d) => n + d.heading.length + d.body.length, 0);
    expect(size).toBeLessThanOrEqual(MEMORY_DECISIONS_MAX_CHARS);
    expect(seen.pastDecisions.length).toBeGreaterThan(3);
    expect(seen.pastDecisions.length).toBeLessThan(20);
    // The newest are kept, oldest first as the file reads.
    expect(seen.pastDecisions.map((d) => d.runId)).toEqual(runs.slice(20 - seen.pastDecisions.length));
    expect(seen.raw).toContain(`${20 - seen.pastDecisions.length} older past decision(s) left out`);
  });
});
