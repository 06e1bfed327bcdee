"use client";

import { useEffect, useState } from "react";
import type { Deadline } from "@/components/runs/api";

/** "1h 05m", "4m 09s", "12s": the time left, to the second under an hour. */
export function formatLeft(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3_600);
  const m = Math.floor((s % 3_600) / 60);
  const sec = s % 60;
  const pad = (n: number) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${pad(m)}m`;
  if (m > 0) return `${m}m ${pad(sec)}s`;
  return `${sec}s`;
}

function who(to: { role: string } | { userId: string }, name?: string | null): string {
  return "userId" in to ? (name ?? to.userId) : `the project's ${to.role}s`;
}

/** What happens at the deadline, in words. */
export function thenWhat(deadline: Deadline): string {
  const onTimeout = deadline.onTimeout;
  if (onTimeout.action === "escalate") return `then it escalates to ${who(onTimeout.to, deadline.escalatesToName)}`;
  if (onTimeout.action === "default") return `then the default applies: “${onTimeout.answer}”`;
  return "then the run is cancelled";
}

/**
 * A gate's or question's deadline as a live countdown (config.deadlines), with what happens when it runs out; after
 * an escalation, who may now decide. Ticks every second on the browser's clock.
 */
export function DeadlineCountdown({ deadline }: { deadline: Deadline | null | undefined }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!deadline || deadline.timedOut) return;
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, [deadline]);
  if (!deadline) return null;
  if (deadline.escalated) {
    return (
      <p className="rounded-md border border-amber-500/50 bg-amber-500/10 px-3 py-2 text-sm" data-testid="deadline-countdown" data-state="escalated" role="status">
        The deadline passed: escalated to <strong>{who(deadline.escalated.to, deadline.escalatesToName)}</strong>, who may now decide too.
      </p>
    );
  }
  const left = deadline.at - now;
  const passed = deadline.timedOut || left <= 0;
  return (
    <p
      className="rounded-md border border-amber-500/50 bg-amber-500/10 px-3 py-2 text-sm"
      data-testid="deadline-countdown"
      data-state={passed ? "passed" : "running"}
      data-deadline-at={deadline.at}
      role="timer"
      aria-live="off"
    >
      {passed ? (
        <>The deadline has passed; {thenWhat(deadline).replace(/^then /, "")}.</>
      ) : (
        <>
          Decide within <strong data-testid="deadline-left" suppressHydrationWarning>{formatLeft(left)}</strong> (by <span suppressHydrationWarning>{new Date(deadline.at).toLocaleString()}</span>); {thenWhat(deadline)}.
        </>
      )}
    </p>
  );
}
