import type { ApiEvent } from "./timeline";

/*
 * Parallel tasks (limits.maxConcurrentTasks) on the timeline: one lane per task, with a bar per run of the task from its
 * branch being cut (TASK_BRANCH_CREATED) to its merge (TASK_MERGED) or conflict (TASK_MERGE_CONFLICT) — bars that
 * overlap in time are tasks that ran at once. Positions are fractions of the span from the first bar's start to the
 * last bar's end (or to `now` while a task still runs).
 */

export type TaskBar = { run: number; start: number; end: number | null; state: "working" | "merged" | "conflict" | "stopped"; left: number; width: number };
export type TaskLane = { taskId: string; bars: TaskBar[] };
export type TaskLanes = { lanes: TaskLane[]; start: number; end: number; overlap: boolean };

export function taskLanes(events: ReadonlyArray<ApiEvent>, now: number): TaskLanes | null {
  const lanes = new Map<string, Array<Omit<TaskBar, "left" | "width">>>();
  let ended: number | null = null;
  for (const event of events) {
    const p = event.payload as { taskId?: unknown; run?: unknown };
    const at = Date.parse(event.timestamp);
    if (event.type === "RUN_COMPLETED" || event.type === "RUN_FAILED" || event.type === "RUN_CANCELLED") ended = at;
    if (typeof p.taskId !== "string") continue;
    const bars = lanes.get(p.taskId);
    const open = bars?.at(-1)?.end === null ? bars.at(-1)! : null;
    if (event.type === "TASK_BRANCH_CREATED") {
      if (open) Object.assign(open, { end: at, state: "stopped" });
      lanes.set(p.taskId, [...(bars ?? []), { run: typeof p.run === "number" ? p.run : (bars?.length ?? 0) + 1, start: at, end: null, state: "working" }]);
    } else if (open && (event.type === "TASK_MERGED" || event.type === "TASK_MERGE_CONFLICT")) {
      Object.assign(open, { end: at, state: event.type === "TASK_MERGED" ? "merged" : "conflict" });
    }
  }
  if (!lanes.size) return null;
  // A task still open when the run ended (cancelled, failed) stopped there.
  if (ended !== null) for (const bars of lanes.values()) for (const bar of bars) if (bar.end === null) Object.assign(bar, { end: ended, state: "stopped" });
  const all = [...lanes.values()].flat();
  const start = Math.min(...all.map((b) => b.start));
  const end = Math.max(start + 1, ...all.map((b) => b.end ?? now));
  const span = end - start;
  const overlap = all.some((a, i) => all.some((b, j) => i < j && a.start < (b.end ?? now) && b.start < (a.end ?? now)));
  return {
    start,
    end,
    overlap,
    lanes: [...lanes].map(([taskId, bars]) => ({
      taskId,
      bars: bars.map((b) => ({ ...b, left: (b.start - start) / span, width: Math.max(0.005, ((b.end ?? now) - b.start) / span) })),
    })),
  };
}
