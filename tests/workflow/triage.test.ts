import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createProject } from "@/lib/projects/queries";
import { autoPlanning, expectRunConsistent, fileBlock, git, launch, makeRepo, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

/** Triage through the real workflow: a task whose own checks already pass is skipped, unless below the threshold. */

const h = useWorkflowHarness();

// The demo implementer writes a line naming the task into each of its Files: (issue #31 item 7), so T1's title says
// "hello": a task implemented anyway still passes its own check.
const TASKS = [
  "- [ ] T1: Write the hello greeting",
  "  Files: greet.txt",
  "  Check: grep -q hello greet.txt",
  "- [ ] T2: Write the farewell (after T1)",
  "  Files: bye.txt",
  "  Check: test -f bye.txt",
  "- [ ] T3: Document it (after T2)",
  "  Files: docs/requests/triage-run.md",
].join("\n");

async function triageRun(config: Record<string, unknown>) {
  const repo = makeRepo();
  // The greeting is already there: T1's check passes before anything is implemented.
  fs.writeFileSync(path.join(repo, "greet.txt"), "hello\n");
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "greeting");
  const project = await createProject({ name: "triage", ownerId: h.user.id, repository: { type: "local", path: repo } });
  const request = ["Triage run", "```tasks.md", TASKS, "```", fileBlock("bye.txt", "bye")].join("\n");
  const run = await launch(h.user, project.id, request, { ...autoPlanning, ...config });
  expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
  await waitForWorkflow(run.id);
  return { repo, run, events: await expectRunConsistent(run.id) };
}

const completed = (events: Array<{ type: string; payload: unknown }>) =>
  events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId);

describe("triage", () => {
  it("a task whose checks pass and whose files are present is triaged as done (with confidence and evidence) and skipped", { timeout: 120_000 }, async () => {
    const { repo, run, events } = await triageRun({});
    const triaged = events.filter((e) => e.type === "TASK_TRIAGED").map((e) => e.payload);
    expect(triaged).toEqual([
      { stepKey: "triage", taskId: "T1", confidence: 0.9, evidence: ["`grep -q hello greet.txt` passes", "greet.txt is present"], skipped: true },
    ]);
    // Never implemented: no TASK_STARTED/COMPLETED for T1, and the implementer's first checkpoint is T2's.
    expect(completed(events)).toEqual(["T2", "T3"]);
    expect(events.some((e) => e.type === "TASK_STARTED" && (e.payload as { taskId: string }).taskId === "T1")).toBe(false);
    // Its box is checked on the branch all the same, and validation's dependency-order check counts it as first.
    expect(git(repo, "show", `${run.branch}:.autonomous/tasks.md`)).toContain("- [x] T1: Write the hello greeting");
    expect(git(repo, "log", "--format=%s", run.branch!)).toContain(`.autonomous/tasks.md: T1 done (run ${run.id})`);
    expect(events.find((e) => e.type === "VALIDATION_PASSED")).toBeTruthy();
  });

  it("below triage.threshold the task is recorded as maybe done and implemented anyway", { timeout: 120_000 }, async () => {
    const { events } = await triageRun({ triage: { threshold: 0.95 } });
    expect(events.filter((e) => e.type === "TASK_TRIAGED").map((e) => e.payload)).toMatchObject([{ taskId: "T1", confidence: 0.9, skipped: false }]);
    expect(completed(events)).toEqual(["T1", "T2", "T3"]);
  });
});
