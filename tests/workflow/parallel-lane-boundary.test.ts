import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getEnv } from "@/lib/env";
import { listEvents } from "@/lib/db/event-store";
import { taskSandboxId } from "@/lib/runs/steps/workspace";
import { git, launch, newProject, startWorkflowHarness, waitForStatus } from "./harness";

/**
 * Between two tasks of a lane (inngest/run/tasks.ts), the finished task's sandbox used to go in the lane's deciding
 * step, before the next task's begin step — one more stretch of git (the project config read, the worktree's removal
 * and prune) on the lane's critical path. It now goes in the next task's begin step, side by side with cutting the
 * task's branch and building its starting state; the deciding step runs no git when the lane takes the task, and the
 * lane still holds one sandbox at a time (the previous one is gone when the begin step ends, before the first turn
 * makes the next).
 */

const seen = vi.hoisted(() => ({
  inNext: null as null | import("node:async_hooks").AsyncLocalStorage<boolean>,
  nextGits: [] as string[][],
  begins: [] as Array<{ taskId: string; previous: string | null; before: boolean; after: boolean }>,
  onDisk: ((_runId: string, _taskId: string) => false) as (runId: string, taskId: string) => boolean,
}));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("../git/spawn-record");
  return recordingSpawner(await importOriginal(), (request) => {
    // Only what the lane's deciding step itself spawns (its async context).
    if (seen.inNext?.getStore() && request.file === "git") seen.nextGits.push(commandOf(request).slice(1));
  });
});
vi.mock("@/lib/runs/steps/lanes", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/lanes")>();
  return { ...original, nextInLane: (input: Parameters<typeof original.nextInLane>[0]) => seen.inNext!.run(true, () => original.nextInLane(input)) };
});
vi.mock("@/lib/runs/steps/tasks", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/tasks")>();
  return {
    ...original,
    beginTask: async (input: Parameters<typeof original.beginTask>[0]) => {
      // Whether the lane's previous task (T1 before T3) still has its worktree when the next one begins, and after.
      const previous = input.previousTaskId ?? null;
      const before = previous ? seen.onDisk(input.runId, previous) : false;
      const out = await original.beginTask(input);
      seen.begins.push({ taskId: input.taskId, previous, before, after: previous ? seen.onDisk(input.runId, previous) : false });
      return out;
    },
  };
});
seen.inNext = new AsyncLocalStorage<boolean>();
seen.onDisk = (runId, taskId) => fs.existsSync(path.join(getEnv().dataDir, "workspaces", taskSandboxId(runId, taskId)));

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

const TASKS = ["# Three", "- [ ] T1: Write one", "  Files: one.txt", "- [ ] T2: Write two", "  Files: two.txt", "- [ ] T3: Write three", "  Files: three.txt", ""].join("\n");

describe("a lane's task boundary", () => {
  it("begins the next task in the lane's deciding step and releases the finished task's sandbox there, beside the task's start: no git before it", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // Two lanes: [T1, T3] and [T2].
    const run = await launch(h.user, project.id, ["Three in two lanes", "", "```tasks.md", TASKS, "```"].join("\n"), {
      trustMode: { planning: "auto" },
      limits: { maxConcurrentTasks: 2 },
    });
    expect((await waitForStatus(run.id, ["completed", "failed"], 150_000)).status).toBe("completed");
    const events = await listEvents({ runId: run.id, limit: 1000 });
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:three.txt`)).toBe("T3: Write three");

    // The lane took T3 after T1, and its deciding step ran no git process.
    expect(seen.nextGits).toEqual([]);
    const t3 = seen.begins.find((b) => b.taskId === "T3");
    // T1's worktree was still there as T3's begin step started (its release was no longer ahead of it) and gone as
    // the step ended: the lane never held two sandboxes into T3's first turn.
    expect(t3).toEqual({ taskId: "T3", previous: "T1", before: true, after: false });
    const workspaces = fs.readdirSync(path.join(getEnv().dataDir, "workspaces"));
    expect(workspaces.filter((w) => w.startsWith(taskSandboxId(run.id, "")))).toEqual([]);
  });
});
