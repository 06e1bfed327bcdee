import { AsyncLocalStorage } from "node:async_hooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { expectRunConsistent, git, launch, newProject, startWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

/**
 * A lane's way from a task's last turn to its next task (inngest/run/tasks.ts) is paid only by parallel runs, once per
 * lane boundary and once more at the round's end. Two pieces of it did nothing for most tasks:
 * - the verify step after the turn that finished the task, for a task with no acceptance command: verifyTasks found
 *   nothing to run and recorded nothing, yet it was a race-mode step, i.e. two calls of the run, each replaying it;
 * - the closing turn's "task … complete" commit, made with --allow-empty after the task's own checkpoint had committed
 *   everything: an empty commit on the task's branch, and the secret scan, lookup, staging and commit (seven git
 *   processes) that led to it.
 * Now a task without checks has no verify step, and a closing turn with nothing new in its worktree commits nothing (one
 * `git status` tells). A task with checks is verified as before, and a closing turn with something new (here, what its
 * check wrote) commits it as before.
 */

const seen = vi.hoisted(() => ({
  context: null as null | import("node:async_hooks").AsyncLocalStorage<string>,
  verified: [] as Array<{ stepKey: string; taskIds: string[] }>,
  gits: new Map<string, string[][]>(),
}));
vi.mock("@/lib/git/spawner", async (importOriginal) => {
  const { commandOf, recordingSpawner } = await import("../git/spawn-record");
  return recordingSpawner(await importOriginal(), (request) => {
    const where = seen.context?.getStore();
    if (where && request.file === "git") seen.gits.set(where, [...(seen.gits.get(where) ?? []), commandOf(request).slice(1)]);
  });
});
vi.mock("@/lib/runs/steps/verify", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/verify")>();
  return {
    ...original,
    verifyTasks: (input: Parameters<typeof original.verifyTasks>[0]) => {
      seen.verified.push({ stepKey: input.stepKey, taskIds: input.taskIds });
      return original.verifyTasks(input);
    },
  };
});
vi.mock("@/lib/runs/steps/implement", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/implement")>();
  return {
    ...original,
    // Each turn's git processes under its step key.
    implementTurn: (input: Parameters<typeof original.implementTurn>[0]) => seen.context!.run(input.stepKey, () => original.implementTurn(input)),
  };
});
seen.context = new AsyncLocalStorage<string>();

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

type Ev = { type: string; payload: Record<string, unknown> };

// Two lanes: [T1, T3] and [T2]. T1 has a check that rewrites one of its files; T2 and T3 have none.
const TASKS = [
  "# Three",
  "- [ ] T1: Write one",
  "  Files: one.txt, check.log",
  "  Check: test -f one.txt && echo checked > check.log",
  "- [ ] T2: Write two",
  "  Files: two.txt",
  "- [ ] T3: Write three",
  "  Files: three.txt",
  "",
].join("\n");

describe("a parallel task's last turns", () => {
  let ran: { repo: string; branch: string; events: Ev[] } | null = null;
  const done = async () => {
    if (ran) return ran;
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, ["Three in two lanes", "", "```tasks.md", TASKS, "```"].join("\n"), {
      trustMode: { planning: "auto" },
      limits: { maxConcurrentTasks: 2 },
    });
    expect((await waitForStatus(run.id, ["completed", "failed"], 150_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    const events = (await listEvents({ runId: run.id, limit: 1000 })) as Ev[];
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => e.payload.taskId)).toEqual(["T1", "T2", "T3"]);
    ran = { repo, branch: run.branch!, events };
    return ran;
  };

  it("a task without checks gets no verify step; a task with a check gets one, and passes", { timeout: 180_000 }, async () => {
    const { events } = await done();
    expect(seen.verified.filter((v) => v.stepKey.startsWith("impl:1:task:"))).toEqual([{ stepKey: expect.stringMatching(/^impl:1:task:T1:1:turn:\d+:verify$/), taskIds: ["T1"] }]);
    expect(events.filter((e) => e.type === "TASK_VERIFIED").map((e) => e.payload.taskId)).toEqual(["T1"]);
  });

  it("a closing turn with nothing new in its worktree commits nothing (one look); one with something new commits it", { timeout: 180_000 }, async () => {
    const { repo, branch, events } = await done();
    // Each task's commits, as merged: T2's and T3's are their checkpoint alone; T1's closing turn committed what its
    // check rewrote.
    const commitsOf = (taskId: string) => {
      const merge = events.find((e) => e.type === "TASK_MERGED" && e.payload.taskId === taskId)!.payload.commitSha as string;
      return git(repo, "log", "--format=%s", `${merge}^1..${merge}^2`).split("\n");
    };
    expect(commitsOf("T2")).toEqual([expect.stringMatching(/^Task T2: Write two/)]);
    expect(commitsOf("T3")).toEqual([expect.stringMatching(/^Task T3: Write three/)]);
    expect(commitsOf("T1")).toEqual([expect.stringMatching(/^Task final: task T1 complete/), expect.stringMatching(/^Task T1: Write one/)]);
    expect(git(repo, "show", `${branch}:check.log`)).toBe("checked");
    // T2's and T3's closing turns ran one git process that changes or looks at the worktree: the look itself.
    const closing = (taskId: string) => {
      const keys = [...seen.gits.keys()].filter((k) => k.startsWith(`impl:1:task:${taskId}:1:turn:`));
      return seen.gits.get(keys.at(-1)!)!.filter((c) => !c.includes("cat-file")).map((c) => (c[0] === "--git-dir" ? c.slice(4) : c));
    };
    for (const task of ["T2", "T3"]) expect(closing(task).map((c) => c[0])).toEqual(["status"]);
  });
});
