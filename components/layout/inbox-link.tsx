"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useEffect, useRef } from "react";
import { useQuery } from "@tanstack/react-query";
import { toast } from "sonner";
import { apiGet, runKeys, type Run } from "@/components/runs/api";
import { runsQuery } from "@/lib/dashboard/filters";
import { humanize } from "@/lib/dashboard/format";

const LIMIT = 100;

/**
 * "Waiting on you": the count of runs that need a person, in the navigation; a toast when a new one arrives (not for
 * the ones already waiting when the page loaded).
 */
export function InboxLink() {
  const router = useRouter();
  const { data } = useQuery({
    queryKey: runKeys.inbox,
    queryFn: () => apiGet<{ runs: Run[]; nextCursor: string | null }>(`/api/runs?${runsQuery({ filter: "waiting", limit: LIMIT })}`),
    refetchInterval: 4_000,
  });
  const seen = useRef<Set<string> | null>(null);

  useEffect(() => {
    if (!data) return;
    const waiting = data.runs.map((r) => ({ key: `${r.id}:${r.status}:${r.pendingGate?.gateId ?? r.pendingClarification?.clarificationId ?? ""}`, run: r }));
    if (seen.current) {
      for (const { key, run } of waiting) {
        if (seen.current.has(key)) continue;
        toast(`A run needs you: ${humanize(run.status)}`, {
          description: run.originalRequest.slice(0, 120),
          action: { label: "Open", onClick: () => router.push(`/runs/${run.id}`) },
          duration: 10_000,
        });
      }
    }
    seen.current = new Set(waiting.map((w) => w.key));
  }, [data, router]);

  const count = data?.runs.length ?? 0;
  const label = data?.nextCursor ? `${LIMIT}+` : String(count);
  return (
    <Link href="/?filter=waiting" className="text-muted-foreground hover:text-foreground inline-flex items-center gap-1.5 text-sm" data-testid="nav-inbox">
      Waiting on you
      {count > 0 && (
        <span
          className="inline-flex min-w-5 items-center justify-center rounded-full bg-amber-500 px-1.5 text-xs font-semibold text-white dark:text-black"
          data-testid="inbox-count"
          aria-label={`${label} runs waiting`}
        >
          {label}
        </span>
      )}
    </Link>
  );
}
