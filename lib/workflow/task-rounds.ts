import type { PlanDocument } from "./events";

/*
 * Parallel tasks (limits.maxConcurrentTasks), as pure scheduling: the rounds a plan's tasks run in, and the lanes of a
 * round. A round takes every open task whose dependencies are all done (merged, or skipped by triage; a dependency
 * that is not a task of the plan counts as met), in plan order, and deals them into at most `limit` lanes (round-robin:
 * lane k gets the round's tasks k, k+limit, …); a lane runs its tasks one after another, the lanes side by side, and
 * the round's finished tasks merge when every lane has ended. The workflow schedules with it (deterministic on replay)
 * and the estimate on the plan card counts wall time by it.
 */

type Task = Pick<PlanDocument["tasks"][number], "id" | "dependsOn" | "files">;

/** A `Files:` entry as compared: no leading `./` or `/`, no trailing `/`, and only the part before any glob character. */
function fileKey(file: string): string {
  const plain = file.trim().replace(/\\/g, "/").replace(/^(\.\/)+/, "").replace(/^\/+/, "");
  const glob = plain.search(/[*?[{]/);
  return (glob >= 0 ? plain.slice(0, plain.lastIndexOf("/", glob) + 1) : plain).replace(/\/+$/, "");
}

/** Whether two tasks name a file in common: the same path, one inside the other's directory, or a glob's directory. */
export function filesOverlap(a: ReadonlyArray<string> | undefined, b: ReadonlyArray<string> | undefined): boolean {
  const left = (a ?? []).map(fileKey);
  const right = (b ?? []).map(fileKey);
  return left.some((x) => right.some((y) => x === y || x === "" || y === "" || y.startsWith(`${x}/`) || x.startsWith(`${y}/`)));
}

/**
 * What a task waits for: its own dependencies, and every earlier task (plan order) whose `Files:` overlap its own —
 * two tasks editing one file run one after the other, the later on top of the earlier's merge, so neither's work is
 * lost to a merge and the plan's later word on a file is the one that lands (deterministic, whatever the timing).
 */
export function effectiveDependencies<T extends Task>(tasks: T[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [i, task] of tasks.entries()) {
    const sharing = tasks.slice(0, i).filter((earlier) => filesOverlap(earlier.files, task.files)).map((t) => t.id);
    out.set(task.id, [...new Set([...(task.dependsOn ?? []), ...sharing])]);
  }
  return out;
}

/**
 * Open tasks (in plan order) whose dependencies — their own, and the earlier tasks sharing a file with them — are
 * done, skipped, or not tasks of this plan; `held` are left out.
 */
export function readyTasks<T extends Task>(tasks: T[], done: ReadonlySet<string>, skipped: ReadonlySet<string>, held: readonly string[] = []): T[] {
  const known = new Set(tasks.map((t) => t.id));
  const deps = effectiveDependencies(tasks);
  return tasks.filter(
    (t) => !done.has(t.id) && !skipped.has(t.id) && !held.includes(t.id) && (deps.get(t.id) ?? []).every((d) => !known.has(d) || done.has(d) || skipped.has(d)),
  );
}

/** A round's tasks dealt into at most `limit` lanes, round-robin in plan order (lane k: tasks k, k+limit, …). */
export function dealLanes<T>(tasks: readonly T[], limit: number): T[][] {
  const lanes: T[][] = [];
  const width = Math.max(1, Math.floor(limit));
  for (const [i, task] of tasks.entries()) (lanes[i % width] ??= []).push(task);
  return lanes;
}

/**
 * The rounds the plan would run in, every task succeeding: per round its lanes, each the task ids it runs in order.
 * Skipped tasks count as done.
 */
export function planRounds(plan: { tasks: Task[] }, skipped: ReadonlySet<string>, limit: number): string[][][] {
  const done = new Set<string>();
  const rounds: string[][][] = [];
  for (;;) {
    const ready = readyTasks(plan.tasks, done, skipped).map((t) => t.id);
    if (!ready.length) return rounds;
    rounds.push(dealLanes(ready, limit));
    for (const id of ready) done.add(id);
  }
}

/** Whether any round would run two lanes at once (otherwise a run keeps its one implementer session). */
export function runsInParallel(plan: { tasks: Task[] }, skip: ReadonlyArray<{ id: string }>, limit: number): boolean {
  if (limit <= 1) return false;
  return planRounds(plan, new Set(skip.map((s) => s.id)), limit).some((lanes) => lanes.length > 1);
}
