"use client";

import { useNow } from "@/components/layout/client-time";
import { formatDuration } from "@/lib/dashboard/format";
import type { StageProgress as Progress } from "@/lib/dashboard/timeline";

/** The running stage: elapsed time (ticking) and task i of n. */
export function StageProgress({ progress, active }: { progress: Progress; active: boolean }) {
  // Null on the server and during hydration: the elapsed time is the browser's, shown once mounted.
  const now = useNow(active ? 1_000 : undefined);
  const task = progress.task;
  const pct = task && task.total > 0 ? Math.round((Math.min(progress.tasksCompleted, task.total) / task.total) * 100) : null;
  return (
    <div className="space-y-2 rounded-md border p-3" data-testid="stage-progress">
      <div className="flex flex-wrap items-center justify-between gap-2 text-sm">
        <span className="font-medium capitalize">
          {progress.stage}
          {progress.attempt > 1 ? ` · attempt ${progress.attempt}` : ""}
        </span>
        <span className="text-muted-foreground tabular-nums" aria-label="Elapsed time">
          {now === null ? "…" : formatDuration(Math.max(0, now - Date.parse(progress.startedAt)))}
        </span>
      </div>
      {task && (
        <>
          <p className="text-muted-foreground text-xs" data-testid="task-progress">
            Task {task.index} of {task.total}: <span className="font-mono">{task.taskId}</span>
          </p>
          {pct !== null && (
            <div className="bg-muted h-1.5 overflow-hidden rounded-full" role="progressbar" aria-valuenow={pct} aria-valuemin={0} aria-valuemax={100} aria-label="Tasks completed">
              <div className="bg-primary h-full transition-all" style={{ width: `${pct}%` }} />
            </div>
          )}
        </>
      )}
    </div>
  );
}
