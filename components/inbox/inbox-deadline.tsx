"use client";

import { useEffect, useState } from "react";
import { Badge } from "@/components/ui/badge";
import { formatLeft } from "@/components/run/deadline-countdown";
import type { InboxItem } from "@/lib/runs/inbox";

/**
 * An inbox item's deadline in a row (config.deadlines): the time left, ticking like the run page's countdown, or that
 * it escalated (to this person: they may decide it as its backup approver). Nothing for an item without a deadline or
 * one already done.
 */
export function InboxDeadline({ item }: { item: Pick<InboxItem, "deadline" | "escalated" | "escalatedToYou" | "done"> }) {
  const at = item.deadline ? Date.parse(item.deadline) : null;
  const ticking = at !== null && !item.done && !item.escalated;
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!ticking) return;
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, [ticking]);
  if (item.done) return null;
  if (item.escalated) {
    return (
      <Badge variant="outline" className="border-amber-500/60 text-amber-700 dark:text-amber-400" data-testid="inbox-item-deadline" data-state="escalated">
        {item.escalatedToYou ? "Escalated to you" : "Escalated"}
      </Badge>
    );
  }
  if (at === null) return null;
  const left = at - now;
  return (
    <span
      className="text-xs font-normal text-amber-700 tabular-nums dark:text-amber-400"
      data-testid="inbox-item-deadline"
      data-state={left > 0 ? "running" : "passed"}
      data-deadline-at={at}
      title={`Due ${new Date(at).toLocaleString()}`}
      suppressHydrationWarning
    >
      {left > 0 ? `Due in ${formatLeft(left)}` : "Deadline passed"}
    </span>
  );
}
