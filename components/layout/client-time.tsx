"use client";

import { useEffect, useState } from "react";
import { formatAge } from "@/lib/dashboard/format";

/*
 * Times that depend on the clock, the time zone or the locale differ between the server's HTML and the browser's first
 * render, and React then discards the server's HTML (a hydration error). They render only once mounted: the server and
 * the first client render show the same placeholder, then the browser fills in its own clock and locale.
 */

/** Date.now() once mounted (null before: on the server and during hydration), ticking every `tickMs` if given. */
export function useNow(tickMs?: number): number | null {
  const [now, setNow] = useState<number | null>(null);
  useEffect(() => {
    setNow(Date.now());
    if (!tickMs) return;
    const timer = setInterval(() => setNow(Date.now()), tickMs);
    return () => clearInterval(timer);
  }, [tickMs]);
  return now;
}

/** "5m 03s" since `iso`, ticking; a placeholder until mounted. */
export function Age({ iso, tickMs = 1_000 }: { iso: string | null | undefined; tickMs?: number }) {
  const now = useNow(tickMs);
  return (
    <time dateTime={iso ?? undefined} className="tabular-nums">
      {now === null ? "…" : formatAge(iso, now)}
    </time>
  );
}

/** A timestamp in the browser's locale and time zone ("time": the time of day only); a placeholder until mounted. */
export function LocalTime({ iso, format = "datetime", className }: { iso: string; format?: "datetime" | "time"; className?: string }) {
  const now = useNow();
  const date = new Date(iso);
  return (
    <time dateTime={iso} className={className}>
      {now === null ? "…" : format === "time" ? date.toLocaleTimeString() : date.toLocaleString()}
    </time>
  );
}
