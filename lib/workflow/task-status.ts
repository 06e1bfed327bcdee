import type { TaskStatus } from "@/lib/mermaid/plan-diagram";

/**
 * Each task's status as the run's events tell it (the live plan diagram, the pull request body): pending until
 * TASK_STARTED (running), TASK_COMPLETED (done) or a skipping TASK_TRIAGED (skipped); a task still running when the
 * implementation fails or the run ends without completing is failed. A later attempt that starts a task again makes it
 * running again.
 */
export function taskStatuses(events: ReadonlyArray<{ type: string; payload: unknown }>): Record<string, TaskStatus> {
  const out: Record<string, TaskStatus> = {};
  const failRunning = () => {
    for (const [id, status] of Object.entries(out)) if (status === "running") out[id] = "failed";
  };
  for (const event of events) {
    const taskId = (event.payload as { taskId?: unknown } | null)?.taskId;
    const id = typeof taskId === "string" && taskId ? taskId : null;
    switch (event.type) {
      case "TASK_TRIAGED":
        if (id && (event.payload as { skipped?: boolean }).skipped === true) out[id] = "skipped";
        break;
      case "TASK_STARTED":
        if (id) out[id] = "running";
        break;
      case "TASK_COMPLETED":
        if (id) out[id] = "done";
        break;
      case "IMPLEMENTATION_FAILED":
      case "RUN_FAILED":
      case "RUN_CANCELLED":
        failRunning();
        break;
    }
  }
  return out;
}

/** A parallel task's own branch as the run page shows it: the latest run's branch, and whether it is merged. */
export type TaskBranch = { branch: string; run: number; state: "working" | "merged" | "conflict" };

/**
 * Each parallel task's branch (limits.maxConcurrentTasks) from the run's events: TASK_BRANCH_CREATED (working; a
 * later run after a conflict replaces it), then TASK_MERGED (merged) or TASK_MERGE_CONFLICT (conflict). Tasks of a
 * single session have none.
 */
export function taskBranches(events: ReadonlyArray<{ type: string; payload: unknown }>): Record<string, TaskBranch> {
  const out: Record<string, TaskBranch> = {};
  for (const event of events) {
    const p = event.payload as { taskId?: string; branch?: string; run?: number } | null;
    if (!p?.taskId || !p.branch) continue;
    if (event.type === "TASK_BRANCH_CREATED") out[p.taskId] = { branch: p.branch, run: p.run ?? 1, state: "working" };
    else if (event.type === "TASK_MERGED" && out[p.taskId]) out[p.taskId]!.state = "merged";
    else if (event.type === "TASK_MERGE_CONFLICT" && out[p.taskId]) out[p.taskId]!.state = "conflict";
  }
  return out;
}
