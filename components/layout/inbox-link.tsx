"use client";

import Link from "next/link";
import { usePathname, useRouter, useSearchParams } from "next/navigation";
import { useEffect, useMemo, useRef } from "react";
import { useQuery } from "@tanstack/react-query";
import { toast } from "sonner";
import { apiGet, runKeys, type Run } from "@/components/runs/api";
import { runsQuery } from "@/lib/dashboard/filters";

const LIMIT = 100;

/**
 * The runs a page shows (/runs/<id>, /compare?runs=a,b, /compare?group=<id> with the group's runs), whose own cards
 * already ask for the decision.
 */
function runsOnScreen(pathname: string | null, compared: string | null, groupRuns: string[] | undefined): string[] {
  const one = /^\/runs\/(run_[^/]+)$/.exec(pathname ?? "")?.[1];
  if (one) return [one];
  if (pathname !== "/compare") return [];
  if (compared) return compared.split(",");
  return groupRuns ?? [];
}

/**
 * "Waiting on you": the count of runs that need a person, in the navigation; one inbox toast (replaced, never stacked)
 * when new ones arrive — not for the ones already waiting when the page loaded, nor for the run on screen.
 */
export function InboxLink() {
  const router = useRouter();
  const pathname = usePathname();
  const { data } = useQuery({
    queryKey: runKeys.inbox,
    queryFn: () => apiGet<{ runs: Run[]; nextCursor: string | null }>(`/api/runs?${runsQuery({ filter: "waiting", limit: LIMIT })}`),
    refetchInterval: 4_000,
  });
  const seen = useRef<Set<string> | null>(null);
  const search = useSearchParams();
  const compared = search.get("runs");
  const group = pathname === "/compare" && !compared ? search.get("group") : null;
  // The same query (and cache entry) as the comparison view's own: no second request for the group.
  const groupRuns = useQuery({
    queryKey: ["run-groups", group ?? ""],
    queryFn: () => apiGet<{ groupId: string; runs: Run[] }>(`/api/run-groups/${encodeURIComponent(group!)}`),
    enabled: !!group,
    select: (g) => g.runs.map((r) => r.id),
  }).data;
  const onScreen = useMemo(() => runsOnScreen(pathname, compared, groupRuns), [pathname, compared, groupRuns]);

  useEffect(() => {
    if (!data) return;
    const waiting = data.runs.map((r) => ({ key: `${r.id}:${r.status}:${r.pendingGate?.gateId ?? r.pendingClarification?.clarificationId ?? ""}`, run: r }));
    if (seen.current) {
      const fresh = waiting.filter((w) => !seen.current!.has(w.key) && !onScreen.includes(w.run.id)).map((w) => w.run);
      if (fresh.length > 0) {
        const one = fresh.length === 1 ? fresh[0]! : null;
        toast(one ? "A run needs you" : `${fresh.length} runs need you`, {
          id: "inbox",
          description: one ? one.title : fresh.slice(0, 3).map((r) => r.title).join(" · "),
          action: { label: "Open", onClick: () => router.push(one ? `/runs/${one.id}` : "/?filter=waiting") },
          duration: 10_000,
          testId: "inbox-toast",
        });
      }
    }
    seen.current = new Set(waiting.map((w) => w.key));
  }, [data, router, onScreen]);

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
