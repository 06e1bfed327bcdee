"use client";

import { CheckCircle2, CircleDot, Hourglass, TriangleAlert, XCircle } from "lucide-react";
import { describeEvent, type ApiEvent, type ChatOrigin, type Tone } from "@/lib/dashboard/timeline";
import { useNow } from "@/components/layout/client-time";
import { cn } from "@/lib/utils";
import type { Connection } from "./use-run-events";
import { TaskLanes } from "./task-lanes";

const ICON: Record<Tone, React.ComponentType<{ className?: string }>> = {
  info: CircleDot,
  success: CheckCircle2,
  warning: TriangleAlert,
  danger: XCircle,
  waiting: Hourglass,
};
const COLOR: Record<Tone, string> = {
  info: "text-muted-foreground",
  success: "text-emerald-600 dark:text-emerald-400",
  warning: "text-amber-600 dark:text-amber-400",
  danger: "text-destructive",
  waiting: "text-amber-600 dark:text-amber-400",
};
const CONNECTION_LABEL: Record<Connection, string> = {
  connecting: "connecting…",
  live: "live",
  polling: "reconnecting (polling)",
  ended: "finished",
};

export function Timeline({
  events,
  connection,
  people = {},
  chatOrigins = [],
}: {
  events: ApiEvent[];
  connection: Connection;
  people?: Record<string, string>;
  /** Decisions made from Slack or Telegram: their lines say "by Ann from Slack". */
  chatOrigins?: ChatOrigin[];
}) {
  const items = events.map((e) => describeEvent(e, people, chatOrigins)).reverse();
  // One clock for the whole list (null until mounted: times are in the browser's locale and zone, not the server's).
  const mounted = useNow() !== null;
  return (
    <section aria-labelledby="timeline-heading" className="space-y-3" data-testid="timeline" data-connection={connection}>
      <div className="flex items-center justify-between">
        <h2 id="timeline-heading" className="text-sm font-semibold">
          Timeline
        </h2>
        <span className="text-muted-foreground inline-flex items-center gap-1.5 text-xs" data-testid="connection">
          <span
            aria-hidden
            className={cn(
              "size-2 rounded-full",
              connection === "live" ? "bg-emerald-500" : connection === "polling" ? "bg-amber-500" : "bg-muted-foreground",
            )}
          />
          {CONNECTION_LABEL[connection]}
        </span>
      </div>
      <TaskLanes events={events} />
      {items.length === 0 ? (
        <p className="text-muted-foreground text-sm">No events yet.</p>
      ) : (
        <ol className="space-y-3" aria-live="polite">
          {items.map((item) => {
            const Icon = ICON[item.tone];
            return (
              <li key={item.sequence} className="flex gap-2.5" data-testid="timeline-item" data-type={item.type}>
                <Icon className={cn("mt-0.5 size-4 shrink-0", COLOR[item.tone])} aria-hidden />
                <div className="min-w-0">
                  <p className="text-sm leading-tight">{item.title}</p>
                  {item.detail && <p className="text-muted-foreground text-xs break-words">{item.detail}</p>}
                  <time className="text-muted-foreground block text-[11px]" dateTime={item.timestamp}>
                    {mounted ? new Date(item.timestamp).toLocaleTimeString() : "…"}
                  </time>
                </div>
              </li>
            );
          })}
        </ol>
      )}
    </section>
  );
}
