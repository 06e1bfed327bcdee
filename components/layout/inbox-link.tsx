"use client";

import Link from "next/link";
import { usePathname, useRouter, useSearchParams } from "next/navigation";
import { useEffect, useMemo, useRef } from "react";
import { useQuery } from "@tanstack/react-query";
import { toast } from "sonner";
import { apiGet, type Run } from "@/components/runs/api";
import { useInboxStream } from "@/components/inbox/use-inbox-stream";

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
 * "Inbox" in the navigation: the count of the caller's unread open items (gates and questions they may decide), fed by
 * the inbox stream; one inbox toast (replaced, never stacked) when new items arrive — not for the ones already open
 * when the page loaded, nor for the run on screen, nor on the inbox page itself.
 */
export function InboxLink() {
  const router = useRouter();
  const pathname = usePathname();
  const snapshot = useInboxStream();
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
    if (!snapshot) return;
    const open = snapshot.items.filter((i) => !i.done);
    // On the inbox page the list itself shows what arrives.
    if (seen.current && pathname !== "/inbox") {
      const fresh = open.filter((i) => !seen.current!.has(i.id) && !onScreen.includes(i.runId));
      const runs = [...new Map(fresh.map((i) => [i.runId, i])).values()];
      if (runs.length > 0) {
        const one = runs.length === 1 ? runs[0]! : null;
        toast(one ? "A run needs you" : `${runs.length} runs need you`, {
          id: "inbox",
          description: one ? `${one.runTitle}: ${one.summary}` : runs.slice(0, 3).map((i) => i.runTitle).join(" · "),
          action: { label: "Open", onClick: () => router.push(one ? one.link : "/inbox") },
          duration: 10_000,
          testId: "inbox-toast",
        });
      }
    }
    seen.current = new Set(open.map((i) => i.id));
  }, [snapshot, router, onScreen, pathname]);

  const unread = snapshot?.unread ?? 0;
  return (
    <Link
      href="/inbox"
      className="text-muted-foreground hover:text-foreground inline-flex items-center gap-1.5 text-sm"
      data-testid="nav-inbox"
      data-live={snapshot ? "true" : "false"}
    >
      Inbox
      {unread > 0 && (
        <span
          className="inline-flex min-w-5 items-center justify-center rounded-full bg-amber-500 px-1.5 text-xs font-semibold text-white dark:text-black"
          data-testid="inbox-count"
          aria-label={`${unread} unread in your inbox`}
        >
          {unread}
        </span>
      )}
    </Link>
  );
}
