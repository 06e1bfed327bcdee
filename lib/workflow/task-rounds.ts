import type { PlanDocument } from "./events";

/*
 * Parallel tasks (limits.maxConcurrentTasks), as pure scheduling: the rounds a plan's tasks run in. A round takes the
 * open tasks whose dependencies are all done (merged, or skipped by triage; a dependency that is not a task of the plan
 * counts as met), in plan order, at most `limit` of them. The workflow schedules with it (deterministic on replay) and
 * the estimate on the plan card counts wall time by it.
 */

type Task = Pick<PlanDocument["tasks"][number], "id" | "dependsOn">;

/** Open tasks (in plan order) whose dependencies are done, skipped, or not tasks of this plan; `held` are left out. */
export function readyTasks<T extends Task>(tasks: T[], done: ReadonlySet<string>, skipped: ReadonlySet<string>, held: readonly string[] = []): T[] {
  const known = new Set(tasks.map((t) => t.id));
  return tasks.filter(
    (t) => !done.has(t.id) && !skipped.has(t.id) && !held.includes(t.id) && (t.dependsOn ?? []).every((d) => !known.has(d) || done.has(d) || skipped.has(d)),
  );
}

/** The rounds the plan would run in (task ids per round), every task succeeding; skipped tasks count as done. */
export function planRounds(plan: { tasks: Task[] }, skipped: ReadonlySet<string>, limit: number): string[][] {
  const done = new Set<string>();
  const rounds: string[][] = [];
  for (;;) {
    const batch = readyTasks(plan.tasks, done, skipped).slice(0, Math.max(1, limit)).map((t) => t.id);
    if (!batch.length) return rounds;
    rounds.push(batch);
    for (const id of batch) done.add(id);
  }
}

/** Whether any round would run two tasks at once (otherwise a run keeps its one implementer session). */
export function runsInParallel(plan: { tasks: Task[] }, skip: ReadonlyArray<{ id: string }>, limit: number): boolean {
  if (limit <= 1) return false;
  return planRounds(plan, new Set(skip.map((s) => s.id)), limit).some((round) => round.length > 1);
}
