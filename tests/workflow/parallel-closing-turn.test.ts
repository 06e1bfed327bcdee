import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { query } from "@/lib/executor/store";
import { expectRunConsistent, git, newProject, useWorkflowHarness, waitForWorkflow } from "./harness";
import { completedInTwoLanes } from "./parallel-fixtures";

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
  /** Tasks whose begin step is to be memoized as a run from before recorded it: without the first turn. */
  beganTheOldWay: new Set<string>(),
  /** Tasks whose beginTask has just returned (the step that began one makes its first turn next). */
  justBegun: new Set<string>(),
  turnsOutsideBegin: [] as string[],
  /** Each task's last turn call: its key and the start of the step it ran in (a turn made in the same step shares it). */
  lastTurn: new Map<string, { stepKey: string; stepStartedAt: number | undefined }>(),
  /** Turns made in the step of the turn before them (the closing turn, made by the step of the turn that finished the task). */
  foldedTurns: [] as string[],
  /** Make each turn step memoized as a run from before recorded it: without the closing turn. */
  closeTheOldWay: false,
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
vi.mock("@/lib/runs/steps/tasks", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/tasks")>();
  return {
    ...original,
    beginTask: async (input: Parameters<typeof original.beginTask>[0]) => {
      const out = await original.beginTask(input);
      seen.justBegun.add(input.taskId);
      return out;
    },
  };
});
vi.mock("@/lib/runs/steps/implement", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/runs/steps/implement")>();
  return {
    ...original,
    // Each turn's git processes under its step key.
    implementTurn: (input: Parameters<typeof original.implementTurn>[0]) => {
      const inBegin = seen.justBegun.delete(input.taskId!) && /:turn:0$/.test(input.stepKey);
      // A begin step as a run from before memoized it: no first turn in it (undefined is left out of its JSON).
      if (inBegin && seen.beganTheOldWay.has(input.taskId!)) return Promise.resolve(undefined as unknown as Awaited<ReturnType<typeof original.implementTurn>>);
      if (!inBegin && /:turn:0$/.test(input.stepKey)) seen.turnsOutsideBegin.push(input.stepKey);
      const before = seen.lastTurn.get(input.taskId!);
      seen.lastTurn.set(input.taskId!, { stepKey: input.stepKey, stepStartedAt: input.stepStartedAt });
      const folded = !!before && before.stepStartedAt !== undefined && before.stepStartedAt === input.stepStartedAt && before.stepKey !== input.stepKey;
      if (folded) {
        seen.foldedTurns.push(input.stepKey);
        // A turn step as a run from before memoized it: no closing turn in it (undefined is left out of its JSON).
        if (seen.closeTheOldWay) return Promise.resolve(undefined as unknown as Awaited<ReturnType<typeof original.implementTurn>>);
      }
      return seen.context!.run(input.stepKey, () => original.implementTurn(input));
    },
  };
});
seen.context = new AsyncLocalStorage<string>();

const h = useWorkflowHarness();

type Ev = { type: string; payload: Record<string, unknown> };

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

/** The run's memoized steps, by hashed id. */
async function memoized(runId: string): Promise<Map<string, string>> {
  const [wf] = await query<{ id: string }>("SELECT id FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?", [runId]);
  const rows = await query<{ hashed_id: string; result: string }>("SELECT hashed_id, result FROM executor_steps WHERE run_id = ?", [wf!.id]);
  return new Map(rows.map((r) => [r.hashed_id, r.result]));
}

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
  let ran: { runId: string; repo: string; branch: string; events: Ev[] } | null = null;
  const done = async () => {
    if (ran) return ran;
    const { project, repo } = await newProject(h.user);
    const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Three in two lanes", tasks: TASKS });
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    const events = (await listEvents({ runId: run.id, limit: 1000 })) as Ev[];
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => e.payload.taskId)).toEqual(["T1", "T2", "T3"]);
    ran = { runId: run.id, repo, branch: run.branch!, events };
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

  it("a task's first turn is made by the step that begins it — a lane's first task's begin step, its next task's deciding step — not by a step of its own", { timeout: 180_000 }, async () => {
    const { runId, events } = await done();
    const steps = await memoized(runId);
    const firstOf = (id: string) => {
      const stored = steps.get(sha1(id));
      const value = stored === undefined ? undefined : (JSON.parse(stored) as { data: { first?: { kind: string }; begun?: { first?: { kind: string } } } }).data;
      return value?.begun?.first ?? value?.first;
    };
    // T1 and T2 begin their lanes; T3 follows T1 in T1's lane.
    expect(firstOf("impl:1:task:T1:1:begin")?.kind).toBeTruthy();
    expect(firstOf("impl:1:task:T2:1:begin")?.kind).toBeTruthy();
    expect(firstOf("impl:1:round:1:next:T3")?.kind).toBeTruthy();
    for (const task of ["T1", "T2", "T3"]) expect(steps.has(sha1(`impl:1:task:${task}:1:turn:0`))).toBe(false);
    expect(seen.turnsOutsideBegin.filter((k) => k.startsWith("impl:1:task:"))).toEqual([]);
    // The turn keeps its key: its events and its model call are the first turn's, as before.
    const started = events.filter((e) => e.type === "TASK_STARTED").map((e) => [e.payload.taskId, (e.payload as { stepKey?: string }).stepKey]);
    expect(started).toEqual(expect.arrayContaining([["T1", "impl:1:task:T1:1:turn:0"], ["T2", "impl:1:task:T2:1:turn:0"], ["T3", "impl:1:task:T3:1:turn:0"]]));
  });
});

/** The turn that finished a task (its TASK_COMPLETED's step key) and the session's next turn, the closing one. */
function lastTurnsOf(events: Ev[], taskId: string): { finishing: string; closing: string } {
  const finishing = (events.find((e) => e.type === "TASK_COMPLETED" && e.payload.taskId === taskId)!.payload as { stepKey: string }).stepKey;
  const [, prefix, n] = /^(.*:turn:)(\d+)$/.exec(finishing)!;
  return { finishing, closing: `${prefix}${Number(n) + 1}` };
}

describe("a parallel task's closing turn", () => {
  it("is made by the step of the turn that finished the task when nothing comes between them — a task with a check gets its verify step between them, and its closing turn's own step", { timeout: 180_000 }, async () => {
    seen.foldedTurns = [];
    const { project } = await newProject(h.user);
    const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Three, closing", tasks: TASKS });
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    const events = (await listEvents({ runId: run.id, limit: 1000 })) as Ev[];
    const steps = await memoized(run.id);
    const stored = (id: string) => {
      const value = steps.get(sha1(id));
      return value === undefined ? undefined : (JSON.parse(value) as { data: { kind: string; closing?: { kind: string } } }).data;
    };
    for (const task of ["T2", "T3"]) {
      const { finishing, closing } = lastTurnsOf(events, task);
      // The finishing turn's step carries the closing turn's result; the closing turn has no step of its own.
      expect(stored(finishing)).toMatchObject({ kind: "continue", closing: { kind: "done" } });
      expect(steps.has(sha1(closing))).toBe(false);
      expect(seen.foldedTurns).toContain(closing);
    }
    // T1's check runs between its finishing turn and its closing turn (a verify step of its own): no fold.
    const t1 = lastTurnsOf(events, "T1");
    expect(stored(t1.finishing)?.closing).toBeUndefined();
    expect(steps.has(sha1(`${t1.finishing}:verify`))).toBe(true);
    expect(stored(t1.closing)?.kind).toBe("done");
    expect(seen.foldedTurns).not.toContain(t1.closing);
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => e.payload.taskId)).toEqual(["T1", "T2", "T3"]);
    // The closing turn's model call is recorded once, under its own key.
    const calls = await query<{ step_key: string }>("SELECT step_key FROM model_calls WHERE workflow_run_id = ? AND step_key LIKE ?", [run.id, `%${lastTurnsOf(events, "T2").closing}#%`]);
    expect(calls.length).toBe(1);
  });

  it("of a run whose turn steps were memoized without it (a run from before) is made in a step of its own, and the run completes", { timeout: 180_000 }, async () => {
    seen.closeTheOldWay = true;
    seen.foldedTurns = [];
    try {
      const { project, repo } = await newProject(h.user);
      const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Three, closing the old way", tasks: TASKS });
      await waitForWorkflow(run.id);
      await expectRunConsistent(run.id);
      const events = (await listEvents({ runId: run.id, limit: 1000 })) as Ev[];
      const steps = await memoized(run.id);
      for (const task of ["T2", "T3"]) {
        const { finishing, closing } = lastTurnsOf(events, task);
        expect(seen.foldedTurns).toContain(closing);
        expect((JSON.parse(steps.get(sha1(finishing))!) as { data: { closing?: unknown } }).data.closing).toBeUndefined();
        expect((JSON.parse(steps.get(sha1(closing))!) as { data: { kind: string } }).data.kind).toBe("done");
      }
      expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => e.payload.taskId)).toEqual(["T1", "T2", "T3"]);
      expect(git(repo, "show", `${run.branch}:three.txt`)).toBe("T3: Write three");
    } finally {
      seen.closeTheOldWay = false;
    }
  });
});

describe("a run whose begin steps were memoized without the first turn (a run from before)", () => {
  it("makes each such task's first turn in a step of its own, and completes", { timeout: 180_000 }, async () => {
    seen.beganTheOldWay = new Set(["T1", "T2", "T3"]);
    seen.turnsOutsideBegin = [];
    try {
      const { project, repo } = await newProject(h.user);
      const run = await completedInTwoLanes({ user: h.user, projectId: project.id, title: "Three the old way", tasks: TASKS });
      await waitForWorkflow(run.id);
      await expectRunConsistent(run.id);
      const steps = await memoized(run.id);
      for (const task of ["T1", "T2", "T3"]) expect(steps.has(sha1(`impl:1:task:${task}:1:turn:0`))).toBe(true);
      expect([...seen.turnsOutsideBegin].sort()).toEqual(["impl:1:task:T1:1:turn:0", "impl:1:task:T2:1:turn:0", "impl:1:task:T3:1:turn:0"]);
      const events = (await listEvents({ runId: run.id, limit: 1000 })) as Ev[];
      expect(events.filter((e) => e.type === "TASK_STARTED").length).toBe(3);
      expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => e.payload.taskId)).toEqual(["T1", "T2", "T3"]);
      expect(git(repo, "show", `${run.branch}:three.txt`)).toBe("T3: Write three");
    } finally {
      seen.beganTheOldWay = new Set();
    }
  });
});
