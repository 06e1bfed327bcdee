import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { triage } from "@/lib/runs/steps/triage";
import { hasWorkspace, releaseSandbox } from "@/lib/sandbox";
import { loadRun } from "@/lib/runs/steps/context";
import { sandboxOptions } from "@/lib/runs/steps/workspace";
import type { PlanDocument } from "@/lib/workflow";
import { git, launch, makeRepo, startWorkflowHarness, waitForPendingGate } from "./harness";

/*
 * Triage of a plan whose tasks name files but have no checks: nothing runs, so the files are looked up in the run
 * branch's tree — what a sandbox checked out now would hold — and no worktree is made for it. Where the tree cannot
 * tell (a symbolic link on the way), the sandbox is asked as before. The verdicts are the sandbox's either way.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

/** A run waiting at its plan gate (its branch made, no sandbox yet), on a repository with files, a folder and a link. */
async function runAtPlanGate() {
  const repo = makeRepo();
  fs.mkdirSync(path.join(repo, "src/lib"), { recursive: true });
  fs.writeFileSync(path.join(repo, "src/lib/a.ts"), "export const a = 1;\n");
  fs.writeFileSync(path.join(repo, "greet.txt"), "hello\n");
  fs.symlinkSync("src", path.join(repo, "link"));
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "files");
  const project = await createProject({ name: `triage-files-${Date.now()}`, ownerId: h.user.id, repository: { type: "local", path: repo } });
  // Threshold 0.3: a task whose files are all present (and no check) is skipped, so presence decides something.
  const run = await launch(h.user, project.id, "Triage files", { trustMode: { planning: "manual" }, triage: { threshold: 0.3 } });
  await waitForPendingGate(run.id);
  return run;
}

const plan = (tasks: PlanDocument["tasks"]): PlanDocument => ({ summary: "s", mermaid: "flowchart TD\n  A --> B", tasks, acceptanceCriteria: [] });

const verdicts = async (runId: string) =>
  (await listEvents({ runId, limit: 1000 })).filter((e) => e.type === "TASK_TRIAGED").map((e) => {
    const { taskId, confidence, evidence, skipped } = e.payload as { taskId: string; confidence: number; evidence: string[]; skipped: boolean };
    return { taskId, confidence, evidence, skipped };
  });

describe("triage of tasks without checks", () => {
  it("answers from the branch's tree as `test -e` in a checkout would, and makes no worktree", { timeout: 120_000 }, async () => {
    const run = await runAtPlanGate();
    const out = await triage({
      runId: run.id,
      plan: plan([
        { id: "T1", title: "present", files: ["greet.txt", "src/lib/a.ts", "src/lib/", "src"] },
        { id: "T2", title: "one missing", files: ["greet.txt", "src/lib/b.ts"] },
        { id: "T3", title: "under a file", files: ["greet.txt/x"] },
        { id: "T4", title: "nothing named", files: [] },
      ]),
    });
    expect(out.skip.map((s) => s.id)).toEqual(["T1"]);
    expect(await verdicts(run.id)).toEqual([
      {
        taskId: "T1",
        confidence: 0.3,
        evidence: ["greet.txt is present", "src/lib/a.ts is present", "src/lib/ is present", "src is present", "no check of its own proves it"],
        skipped: true,
      },
    ]);
    // Nothing was checked out for it: the implementer's first step makes the run's sandbox.
    expect(await hasWorkspace(run.id)).toBe(false);
  });

  it("asks the sandbox when a symbolic link is on a path's way, with the same verdicts", { timeout: 120_000 }, async () => {
    const run = await runAtPlanGate();
    const out = await triage({
      runId: run.id,
      plan: plan([
        { id: "T1", title: "through a link", files: ["link/lib/a.ts", "greet.txt"] },
        { id: "T2", title: "missing through a link", files: ["link/lib/b.ts"] },
      ]),
    });
    expect(out.skip.map((s) => s.id)).toEqual(["T1"]);
    expect(await verdicts(run.id)).toEqual([
      { taskId: "T1", confidence: 0.3, evidence: ["link/lib/a.ts is present", "greet.txt is present", "no check of its own proves it"], skipped: true },
    ]);
    expect(await hasWorkspace(run.id)).toBe(true);
    await releaseSandbox(await sandboxOptions(await loadRun({ runId: run.id })));
  });
});
