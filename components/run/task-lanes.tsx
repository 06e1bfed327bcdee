"use client";

import { useMemo } from "react";
import { useNow } from "@/components/layout/client-time";
import type { ApiEvent } from "@/lib/dashboard/timeline";
import { taskLanes, type TaskBar } from "@/lib/dashboard/task-lanes";
import { cn } from "@/lib/utils";

const BAR: Record<TaskBar["state"], string> = {
  working: "bg-sky-500/70",
  merged: "bg-emerald-500/70",
  conflict: "bg-amber-500/70",
  stopped: "bg-muted-foreground/50",
};

/** Parallel tasks on the timeline: a lane per task, a bar per run of it (branch cut → merge); overlapping bars ran at once. */
export function TaskLanes({ events }: { events: ApiEvent[] }) {
  const now = useNow(1_000);
  const lanes = useMemo(() => (now === null ? null : taskLanes(events, now)), [events, now]);
  if (!lanes) return null;
  const seconds = Math.round((lanes.end - lanes.start) / 1000);
  return (
    <div className="space-y-1.5" data-testid="task-lanes" data-overlap={lanes.overlap}>
      <p className="text-muted-foreground text-xs">
        Parallel tasks · {seconds}s{lanes.overlap ? " · overlapping bars ran at the same time" : ""}
      </p>
      {lanes.lanes.map((lane) => (
        <div key={lane.taskId} className="flex items-center gap-2" data-testid={`task-lane-${lane.taskId}`}>
          <span className="text-muted-foreground w-10 shrink-0 truncate font-mono text-[11px]">{lane.taskId}</span>
          <div className="bg-muted relative h-2.5 flex-1 rounded-sm">
            {lane.bars.map((bar) => (
              <span
                key={bar.run}
                title={`${lane.taskId} run ${bar.run}: ${bar.state}`}
                className={cn("absolute top-0 h-full rounded-sm", BAR[bar.state])}
                style={{ left: `${bar.left * 100}%`, width: `${bar.width * 100}%` }}
              />
            ))}
          </div>
        </div>
      ))}
    </div>
  );
}
