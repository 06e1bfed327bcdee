import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { getEnv } from "@/lib/env";
import { listEvents } from "@/lib/db/event-store";
import { laneSandboxId } from "@/lib/runs/steps/workspace";
import { git, makeRepo, newProject, useWorkflowHarness } from "./harness";
import { THREE_TASKS, completedInTwoLanes } from "./parallel-fixtures";

/**
 * Between two tasks of a lane (inngest/run/tasks.ts), the finished task's worktree used to be removed and pruned, the
 * next task's branch cut (two git processes), and a new worktree added by the next task's first turn (three more git
 * processes and the add) — all on the lane's critical path. The lane now keeps one worktree: the next task's begin step
 * (in the lane's deciding step) re-points it to the task's branch, cut at the round's start commit, and cleans it — two
 * git processes, no worktree command — and its first turn finds it ready. The lane's first task gets its worktree in
 * its begin step too, its branch cut by the same `git worktree add -B`.
 */

const seen = vi.hoisted(() => ({
  context: null as null | import("node:async_hooks").AsyncLocalStorage<string>,
  gits: new Map<string, string[][]>(),
  begins: [] as Array<{ taskId: string; previous: string | null; laneOnDisk: boolean }>,
  onDisk: ((_workspace: string) => false) as (workspace: string) => boolean,
}));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("../git/spawn-record");
  return recordingSpawner(await importOriginal(), (request) => {
    // Only what a task's begin step, the lane's decision or a task's first turn spawns (its async context).
    const where = seen.context?.getStore();
    if (where && request.file === "git") seen.gits.set(where, [...(seen.gits.get(where) ?? []), commandOf(request).slice(1)]);
  });
});
vi.mock("@/lib/runs/steps/lanes", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/lanes")>();
  return { ...original, nextInLane: (input: Parameters<typeof original.nextInLane>[0]) => seen.context!.run("next", () => original.nextInLane(input)) };
});
vi.mock("@/lib/runs/steps/tasks", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/tasks")>();
  return {
    ...original,
    beginTask: (input: Parameters<typeof original.beginTask>[0]) =>
      seen.context!.run(`begin:${input.taskId}`, async () => {
        const out = await original.beginTask(input);
        seen.begins.push({ taskId: input.taskId, previous: input.previousTaskId ?? null, laneOnDisk: !!out.workspace && seen.onDisk(out.workspace) });
        return out;
      }),
  };
});
vi.mock("@/lib/runs/steps/implement", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/implement")>();
  return {
    ...original,
    implementTurn: (input: Parameters<typeof original.implementTurn>[0]) =>
      /:turn:0$/.test(input.stepKey) ? seen.context!.run(`turn0:${input.taskId}`, () => original.implementTurn(input)) : original.implementTurn(input),
  };
});
seen.context = new AsyncLocalStorage<string>();
seen.onDisk = (workspace) => fs.existsSync(path.join(getEnv().dataDir, "workspaces", workspace));

const h = useWorkflowHarness();

describe("a lane's task boundary", () => {
  it("hands the lane's worktree to its next task with two git processes and no worktree command; the first turn finds it ready", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    // Two lanes: [T1, T3] and [T2].
    const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Three in two lanes", tasks: THREE_TASKS });
    const events = await listEvents({ runId: run.id, limit: 1000 });
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1", "T2", "T3"]);
    expect(git(repo, "show", `${run.branch}:three.txt`)).toBe("T3: Write three");
    expect(git(repo, "show", `${run.branch}:one.txt`)).toBe("T1: Write one");

    // T1 and T3 worked in their lane's one sandbox, T2 in its own lane's; T3's branch was cut where T1's was.
    const created = Object.fromEntries(
      events.filter((e) => e.type === "TASK_BRANCH_CREATED").map((e) => [(e.payload as { taskId: string }).taskId, e.payload as { workspace?: string; baseSha: string }]),
    );
    expect(created.T1!.workspace).toBe(laneSandboxId(run.id, 1, 1));
    expect(created.T3!.workspace).toBe(created.T1!.workspace);
    expect(created.T2!.workspace).toBe(laneSandboxId(run.id, 1, 2));
    expect(created.T3!.baseSha).toBe(created.T1!.baseSha);

    // The git processes that change something (reads of files at a commit — the project config, instructions — left
    // out), without the explicit git dir and work tree host git is given for a worktree.
    const gits = (where: string) =>
      (seen.gits.get(where) ?? []).filter((c) => !c.includes("cat-file")).map((c) => (c[0] === "--git-dir" ? c.slice(4) : c));
    const worktreeCommands = (where: string) => gits(where).filter((c) => c.includes("worktree"));
    // The lane's decision ran no git; T3's begin re-pointed and cleaned the lane's worktree: two processes.
    expect(gits("next")).toEqual([]);
    expect(gits("begin:T3")).toEqual([["checkout", "--quiet", "--force", "-B", `${run.branch}--T3`, created.T1!.baseSha], ["clean", "-ffdxq"]]);
    // The lane's first task: its branch cut by the same process that added its worktree (no update-ref of its own).
    expect(worktreeCommands("begin:T1").map((c) => c.slice(0, 4))).toEqual([["worktree", "add", "--force", "-B"]]);
    expect(gits("begin:T1").filter((c) => c[0] === "update-ref")).toEqual([]);
    // Every first turn found its sandbox ready.
    for (const task of ["T1", "T2", "T3"]) expect(worktreeCommands(`turn0:${task}`)).toEqual([]);
    // The lane's worktree was there when T3's begin step ended (handed on, never removed in between).
    expect(seen.begins.find((b) => b.taskId === "T3")).toEqual({ taskId: "T3", previous: "T1", laneOnDisk: true });
    // Nothing is left once the run is done.
    const workspaces = fs.readdirSync(path.join(getEnv().dataDir, "workspaces"));
    expect(workspaces.filter((w) => w.startsWith(run.id))).toEqual([]);
  });
});

describe("a lane's worktree handed on", () => {
  it("carries nothing of the task before into the next: its ignored build output is gone, its committed work is on its own branch only", { timeout: 180_000 }, async () => {
    const repo = makeRepo();
    fs.writeFileSync(path.join(repo, ".gitignore"), "build/\n");
    git(repo, "add", ".gitignore");
    git(repo, "commit", "-q", "-m", "ignore build outputs");
    const { project } = await newProject(h.user, repo);
    // Two lanes: [T1, T3] and [T2]. T1 leaves an ignored build output behind (never committed, so only a clean takes
    // it away); T3, next in T1's lane, writes what it finds into its own file.
    const tasks = [
      "# Leftovers",
      "- [ ] T1: Write one",
      "  Files: one.txt",
      "  [run: mkdir -p build && echo object > build/out.o]",
      "- [ ] T2: Write two",
      "  Files: two.txt",
      "- [ ] T3: Write three",
      "  Files: three.txt",
      "  [run: for f in build build/out.o one.txt; do if test -e $f; then echo found $f; else echo no $f; fi; done >> three.txt]",
      "",
    ].join("\n");
    const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Leftovers", tasks });
    const events = await listEvents({ runId: run.id, limit: 1000 });
    const created = events.filter((e) => e.type === "TASK_BRANCH_CREATED").map((e) => e.payload as { taskId: string; workspace?: string });
    // T3 did run in the worktree T1 left.
    expect(created.find((c) => c.taskId === "T3")?.workspace).toBe(created.find((c) => c.taskId === "T1")?.workspace);
    expect(git(repo, "show", `${run.branch}:three.txt`)).toBe("T3: Write three\nno build\nno build/out.o\nno one.txt");
    expect(git(repo, "show", `${run.branch}:one.txt`)).toBe("T1: Write one");
  });
});
