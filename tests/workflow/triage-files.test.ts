import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { triage } from "@/lib/runs/steps/triage";
import { filesPresent } from "@/lib/runs/steps/triage-files";
import { attachSandbox, hasWorkspace, releaseSandbox } from "@/lib/sandbox";
import { loadRun } from "@/lib/runs/steps/context";
import { sandboxOptions } from "@/lib/runs/steps/workspace";
import type { PlanDocument } from "@/lib/workflow";
import { git, launch, makeRepo, useWorkflowHarness, waitForPendingGate } from "./harness";

/*
 * Triage of a plan whose tasks name files but have no checks: nothing runs, so the files are looked up in the run
 * branch's tree — what a sandbox checked out now would hold — and no worktree is made for it. Where the tree cannot
 * tell (a symbolic link on the way), the sandbox is asked as before. The verdicts are the sandbox's either way. With
 * checks, a local worktree's files are looked at from the server where that says what `test -e` inside would, and the
 * workspace is reset after the checks only when they left something.
 */

const h = useWorkflowHarness();

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

describe("triage with checks", () => {
  /**
   * Rollbacks in the run's worktree HEAD reflog: a reset to a commit (even the same one) leaves "reset: moving to <sha>"
   * there (making the worktree leaves "reset: moving to HEAD").
   */
  async function resets(runId: string) {
    const sandbox = await attachSandbox(await sandboxOptions(await loadRun({ runId })));
    const log = await fs.promises.readFile(path.join(sandbox.location.gitDir, "logs", "HEAD"), "utf8").catch(() => "");
    return { count: log.split("\n").filter((l) => /reset: moving to [0-9a-f]{40}$/.test(l)).length, sandbox };
  }

  it("checks that leave the workspace as it was are not followed by a reset; what a check writes is dropped", { timeout: 120_000 }, async () => {
    const reading = await runAtPlanGate();
    await triage({ runId: reading.id, plan: plan([{ id: "T1", title: "reads", files: ["greet.txt"], checks: ["grep -q hello greet.txt", "test -d src"] }]) });
    expect(await verdicts(reading.id)).toEqual([
      { taskId: "T1", confidence: 0.9, evidence: ["`grep -q hello greet.txt` passes", "`test -d src` passes", "greet.txt is present"], skipped: true },
    ]);
    const left = await resets(reading.id);
    expect(left.count).toBe(0);
    await releaseSandbox(await sandboxOptions(await loadRun({ runId: reading.id })));

    const writing = await runAtPlanGate();
    await triage({ runId: writing.id, plan: plan([{ id: "T1", title: "writes", files: ["scratch.txt"], checks: ["echo x > scratch.txt"] }]) });
    // The check made the file, so it was present when looked for; then the workspace was reset.
    expect((await verdicts(writing.id)).map((v) => v.evidence)).toEqual([["`echo x > scratch.txt` passes", "scratch.txt is present"]]);
    const after = await resets(writing.id);
    expect(after.count).toBe(1);
    expect(fs.existsSync(path.join(after.sandbox.workspacePath, "scratch.txt"))).toBe(false);
    await releaseSandbox(await sandboxOptions(await loadRun({ runId: writing.id })));
  });

  it("a local worktree's files are looked at from the server; a symbolic link on the way goes to the sandbox's shell", async () => {
    const root = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), "gatehouse-triage-files-"));
    fs.mkdirSync(path.join(root, "src/lib"), { recursive: true });
    fs.writeFileSync(path.join(root, "src/lib/a.ts"), "");
    fs.writeFileSync(path.join(root, "greet.txt"), "");
    fs.symlinkSync("src", path.join(root, "link"));
    const shells: string[][] = [];
    const sandbox = {
      kind: "local" as const,
      workspacePath: root,
      exec: async (_: string, args: string[]) => {
        shells.push(args.slice(3));
        return { exitCode: 0, stdout: args.slice(3).map((p) => (fs.existsSync(path.join(root, p)) ? "1" : "0")).join("\n"), stderr: "", timedOut: false, truncated: false, durationMs: 0 };
      },
    };
    expect(await filesPresent(sandbox, ["greet.txt", "src/lib/", "src/lib/a.ts", "src/b.ts", "greet.txt/x"])).toEqual([
      { path: "greet.txt", present: true },
      { path: "src/lib/", present: true },
      { path: "src/lib/a.ts", present: true },
      { path: "src/b.ts", present: false },
      { path: "greet.txt/x", present: false },
    ]);
    expect(shells).toEqual([]);
    expect(await filesPresent(sandbox, ["greet.txt", "link/lib/a.ts"])).toEqual([
      { path: "greet.txt", present: true },
      { path: "link/lib/a.ts", present: true },
    ]);
    expect(shells).toEqual([["greet.txt", "link/lib/a.ts"]]);
  });
});
