import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { and, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { listEvents } from "@/lib/db/event-store";
import * as decide from "@/inngest/decide";
import { expectRunConsistent, fileBlock, git, launch, makeRepo, newProject, startWorkflowHarness, until, waitForStatus, waitForWorkflow } from "./harness";

/*
 * The disk fills, then turns read-only, under a run's commit. The project's repository (where every commit of the run
 * writes its objects) lives on a tmpfs of 4 MiB mounted for this test (the test runs as root, as CI here does): it is
 * filled up with a file once a task has started, and later remounted read-only. The database and the workspaces stay
 * on the ordinary disk, so the run can record why it stopped.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
const mnt = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-small-disk-"));
beforeAll(async () => {
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt]);
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
  execFileSync("umount", ["-l", mnt]);
});

const pauses = async (runId: string) =>
  (await listEvents({ runId, limit: 1000 })).filter((e) => e.type === "RUN_PAUSED").map((e) => e.payload as { reason: string; message: string; stage: string | null });

it("full, then read-only at a commit: the run pauses saying so (not failed), nothing is lost, and it resumes to the end once writable", { timeout: 300_000 }, async () => {
  const repo = path.join(mnt, "repo");
  execFileSync("cp", ["-a", makeRepo(), repo]);
  const { project } = await newProject(h.user, repo);
  const request = ["Disk trouble", "", ...[0, 1].map((i) => fileBlock(`src/f${i}.txt`, `content ${i}`))].join("\n");
  // At the default limit the two file tasks run in parallel: each meets the full disk, and the run pauses once for it
  // (the second task joins the pause the first opened); resumed, each retries its own step.
  const run = await launch(h.user, project.id, request, { trustMode: { planning: "auto" } });
  expect((run.config as { limits: { maxConcurrentTasks: number } }).limits.maxConcurrentTasks).toBe(3);
  await until(async () => (await listEvents({ runId: run.id, limit: 1000 })).some((e) => e.type === "TASK_STARTED"), "a task to start");
  const fill = path.join(mnt, "fill");
  try {
    execFileSync("dd", ["if=/dev/zero", `of=${fill}`, "bs=64k"], { stdio: "ignore" });
  } catch {
    // dd stops with ENOSPC: the disk is full now
  }

  // Full: paused with the reason and what to do, in the implementation; not failed.
  expect((await waitForStatus(run.id, ["paused", "failed", "completed"], 120_000)).status).toBe("paused");
  const [full] = await pauses(run.id);
  expect(full).toMatchObject({ reason: "storage", stage: "implementation" });
  expect(full!.message).toMatch(/^Paused: the disk is full where Gatehouse writes \([\s\S]*No space left on device[\s\S]*\)\. Free space or make it writable, then resume the run/);

  // Space freed but the file system read-only now: resumed, it pauses again and says so.
  fs.rmSync(fill);
  execFileSync("mount", ["-o", "remount,ro", mnt]);
  await decide.resume({ user: h.user, runId: run.id, action: "retry" });
  await until(async () => (await pauses(run.id)).length === 2, "the second pause");
  expect((await waitForStatus(run.id, ["paused", "failed", "completed"], 120_000)).status).toBe("paused");
  expect((await pauses(run.id))[1]!.message).toMatch(/^Paused: the file system is read-only where Gatehouse writes \([\s\S]*Read-only file system[\s\S]*\)/);

  // Writable again: resumed, the run goes on from the step that failed and completes.
  execFileSync("mount", ["-o", "remount,rw", mnt]);
  await decide.resume({ user: h.user, runId: run.id, action: "retry" });
  expect((await waitForStatus(run.id, ["completed", "failed"], 120_000)).status).toBe("completed");
  expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");

  const events = await expectRunConsistent(run.id);
  const types = events.map((e) => e.type);
  expect(types).not.toContain("RUN_FAILED");
  expect(types.filter((t) => t === "RUN_RESUMED")).toHaveLength(2);
  // One pause for each state of the disk, whichever task met it first; the tasks ran in parallel.
  expect((await pauses(run.id)).map((p) => p.reason)).toEqual(["storage", "storage"]);
  expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED").length).toBeGreaterThanOrEqual(2);
  // Nothing lost or doubled: every task completed once, each on its own commit, and the files are on the branch.
  const completed = events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId);
  expect(completed.length).toBeGreaterThanOrEqual(2);
  expect(new Set(completed).size).toBe(completed.length);
  const subjects = git(repo, "log", "--format=%s", `main..${run.branch}`).split("\n").filter((s) => s.startsWith("Task "));
  expect(new Set(subjects).size).toBe(subjects.length);
  expect(git(repo, "show", `${run.branch}:src/f0.txt`)).toBe("content 0");
  expect(git(repo, "show", `${run.branch}:src/f1.txt`)).toBe("content 1");
  const db = await getDb();
  const calls = await db.select().from(modelCalls).where(and(eq(modelCalls.workflowRunId, run.id), eq(modelCalls.status, "ok")));
  expect(calls.length).toBeGreaterThan(0);
});
