import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { workflowRuns } from "@/lib/db/schema";
import { getEnv } from "@/lib/env";
import { listEvents } from "@/lib/db/event-store";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { sweepEndedRuns } from "@/lib/runs/cleanup";
import { inngest } from "@/inngest";
import { runCancelled } from "@/inngest/events";
import { fileBlock, git, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/*
 * The cleanup sweep: GATEHOUSE_CLEANUP_AFTER_DAYS after a run failed or was cancelled, its branch and any worktree it
 * left are deleted, once, with RUN_CLEANED_UP; runs that ended more recently, and completed runs, keep theirs.
 */

const h = useWorkflowHarness();

const DAY = 24 * 60 * 60_000;
const branches = (repo: string) => git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split("\n").filter(Boolean);

async function cancelledAtGate(projectId: string, request: string) {
  const run = await launch(h.user, projectId, request, { trustMode: { planning: "manual" } });
  await waitForPendingGate(run.id);
  await cancelRun({ user: h.user, runId: run.id });
  await inngest.send(runCancelled.create({ runId: run.id }));
  await waitForStatus(run.id, ["cancelled"]);
  await waitForWorkflow(run.id);
  return run;
}

describe("cleanup of failed or cancelled runs", () => {
  it("deletes an old cancelled run's branch and leftover worktree once, after the configured days; recent and completed runs keep theirs", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const old = await cancelledAtGate(project.id, "Old idea");
    const recent = await cancelledAtGate(project.id, "Recent idea");
    const completed = await launch(h.user, project.id, `Kept work\n\n${fileBlock("kept.txt", "kept")}`, { trustMode: { planning: "auto" } });
    expect((await waitForStatus(completed.id, ["completed", "failed", "paused"])).status).toBe("completed");
    await waitForWorkflow(completed.id);
    expect(branches(repo)).toEqual(expect.arrayContaining([old.branch, recent.branch, completed.branch]));

    // A worktree the old run left behind (a crash mid-step), with its branch checked out in it.
    const worktree = path.join(getEnv().dataDir, "workspaces", old.id);
    git(repo, "worktree", "add", "--force", worktree, old.branch!);
    fs.mkdirSync(`${worktree}.home`, { recursive: true });

    // The old run ended 31 days before "now"; the recent one ended a day before.
    const now = Date.now() + 30 * DAY;
    const db = await getDb();
    await db.update(workflowRuns).set({ completedAt: new Date(now - 31 * DAY) }).where(eq(workflowRuns.id, old.id));
    await db.update(workflowRuns).set({ completedAt: new Date(now - DAY) }).where(eq(workflowRuns.id, recent.id));
    await db.update(workflowRuns).set({ completedAt: new Date(now - 90 * DAY) }).where(eq(workflowRuns.id, completed.id));

    const first = await sweepEndedRuns({ now, days: 30 });
    expect(first.swept).toEqual([{ runId: old.id, branch: old.branch, branchDeleted: true, worktreeRemoved: true }]);
    expect(branches(repo)).not.toContain(old.branch);
    expect(branches(repo)).toEqual(expect.arrayContaining([recent.branch, completed.branch, "main"]));
    expect(fs.existsSync(worktree)).toBe(false);
    expect(fs.existsSync(`${worktree}.home`)).toBe(false);
    expect(git(repo, "worktree", "list")).not.toContain(old.id);
    const events = await listEvents({ runId: old.id });
    expect(events.at(-1)).toMatchObject({ type: "RUN_CLEANED_UP", payload: { branch: old.branch, branchDeleted: true, worktreeRemoved: true, olderThanDays: 30 } });

    // Swept once: a second sweep at the same time finds nothing; a later one takes the recent run, never the completed.
    expect((await sweepEndedRuns({ now, days: 30 })).swept).toEqual([]);
    const later = await sweepEndedRuns({ now: now + 30 * DAY, days: 30 });
    expect(later.swept.map((s) => s.runId)).toEqual([recent.id]);
    expect(branches(repo)).toEqual(expect.arrayContaining([completed.branch, "main"]));
    expect(branches(repo)).not.toContain(recent.branch);
    expect((await listEvents({ runId: old.id })).filter((e) => e.type === "RUN_CLEANED_UP")).toHaveLength(1);
  });

  it("0 days keeps everything", async () => {
    expect((await sweepEndedRuns({ now: Date.now() + 10_000 * DAY, days: 0 })).swept).toEqual([]);
  });
});
