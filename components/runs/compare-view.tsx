"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useEffect, useState } from "react";
import { useQueries, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRunsEvents } from "@/components/run/use-run-events";
import { toast } from "sonner";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Skeleton } from "@/components/ui/skeleton";
import { BranchDiff } from "@/components/run/branch-diff";
import { MermaidDiagram } from "@/components/run/mermaid-diagram";
import { isTerminal } from "@/lib/dashboard/filters";
import { formatTokens, formatUsd, humanize } from "@/lib/dashboard/format";
import { planVersions, validations } from "@/lib/dashboard/timeline";
import { apiGet, apiSend, runKeys, type Run, type RunDetail } from "./api";
import { Markdown } from "./markdown";
import { StatusBadge } from "./status-badge";

/** The runs of one group (POST /api/runs with `approaches`), as far as the viewer may see them, compared. */
export function CompareGroup({ groupId }: { groupId: string }) {
  const group = useQuery({
    queryKey: ["run-groups", groupId],
    queryFn: () => apiGet<{ groupId: string; runs: Run[] }>(`/api/run-groups/${encodeURIComponent(groupId)}`),
  });
  if (group.isPending) return <Skeleton className="h-40 w-full" data-testid="compare-group-loading" />;
  if (group.error) {
    return (
      <Alert variant="destructive" data-testid="compare-group-error">
        <AlertTitle>Could not load this group of runs</AlertTitle>
        <AlertDescription>{group.error.message}</AlertDescription>
      </Alert>
    );
  }
  return <CompareView runIds={group.data.runs.map((r) => r.id)} />;
}

/** Runs started together ("explore N approaches"), side by side: plan, diff, validation, cost. */
export function CompareView({ runIds }: { runIds: string[] }) {
  // The runs' events stream in (one SSE per run); each new event refreshes that run's projection, as on the run page.
  const eventsByRun = useRunsEvents(runIds);
  const details = useQueries({
    queries: runIds.map((id) => ({
      queryKey: runKeys.detail(id),
      queryFn: () => apiGet<RunDetail>(`/api/runs/${id}`),
    })),
  });
  const queryClient = useQueryClient();
  // A run whose stream has gone past the sequence its projection was read at is refreshed (as on the run page).
  // Keyed by id and streamed sequence, so a refresh that came back still behind is retried at the next event.
  const behind = runIds
    .map((id, i) => ({ id, streamed: eventsByRun[id]?.at(-1)?.sequence ?? 0, read: details[i]?.data?.run.lastSequence }))
    .filter((r) => r.read !== undefined && r.streamed > r.read)
    .map((r) => `${r.id}:${r.streamed}`)
    .join(",");
  useEffect(() => {
    for (const entry of behind.split(",").filter(Boolean)) {
      void queryClient.invalidateQueries({ queryKey: runKeys.detail(entry.slice(0, entry.lastIndexOf(":"))) });
    }
  }, [behind, queryClient]);

  const router = useRouter();
  const [busy, setBusy] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  /** Runs other than `keep` that are still going (a finished run has nothing to cancel). */
  const othersActive = (keep: string) =>
    runIds.filter((id, i) => id !== keep && details[i]?.data && !isTerminal(details[i]!.data!.run.status));
  const cancelOthers = async (keep: string, then?: () => void) => {
    setBusy(keep);
    setActionError(null);
    try {
      const others = othersActive(keep);
      await Promise.all(others.map((id) => apiSend(`/api/runs/${id}/cancel`, {})));
      await Promise.all(others.map((id) => queryClient.invalidateQueries({ queryKey: runKeys.detail(id) })));
      if (others.length) toast.success(`Cancelled ${others.length} other approach${others.length === 1 ? "" : "es"}`);
      then?.();
    } catch (error) {
      setActionError(error instanceof Error ? error.message : String(error));
    } finally {
      setBusy(null);
    }
  };

  if (runIds.length === 0) {
    return (
      <Alert>
        <AlertTitle>Nothing to compare</AlertTitle>
        <AlertDescription>
          Start several approaches from the <Link href="/runs/new" className="underline">New run</Link> page, or open /compare?group=&lt;group id&gt; (a group&apos;s runs) or /compare?runs=id1,id2 (any runs).
        </AlertDescription>
      </Alert>
    );
  }
  return (
    <div className="space-y-3">
    {actionError && (
      <Alert variant="destructive" data-testid="compare-error">
        <AlertTitle>That did not go through</AlertTitle>
        <AlertDescription>{actionError}</AlertDescription>
      </Alert>
    )}
    <div className="overflow-x-auto pb-2">
      <div className="grid gap-4" style={{ gridTemplateColumns: `repeat(${runIds.length}, minmax(18rem, 1fr))` }} data-testid="compare-grid">
        {runIds.map((id, i) => {
          const d = details[i]!;
          // Until a column's events have loaded, its plan and validation are unknown, not absent.
          const eventsLoading = !eventsByRun[id];
          const ev = eventsByRun[id] ?? [];
          const ended = !!d.data && isTerminal(d.data.run.status);
          const plan = planVersions(ev).at(-1);
          const validation = validations(ev).at(-1);
          return (
            <Card key={id} className="min-w-0 gap-4" data-testid="compare-column" data-run-id={id}>
              <CardHeader>
                <CardTitle className="text-base">
                  <Link href={`/runs/${id}`} className="hover:underline">
                    Approach {i + 1}
                  </Link>
                </CardTitle>
                {d.isPending ? (
                  <Skeleton className="h-5 w-32" />
                ) : d.error ? (
                  <p className="text-destructive text-sm">{d.error.message}</p>
                ) : (
                  <div className="space-y-1">
                    <p className="text-sm font-medium" data-testid="compare-title">{d.data.run.title}</p>
                    <p className="text-muted-foreground line-clamp-2 text-xs whitespace-pre-wrap">{d.data.run.originalRequest.split("\n").filter((l) => l.trim()).at(-1)}</p>
                    <div className="flex flex-wrap items-center gap-2 text-xs">
                      <StatusBadge status={d.data.run.status} outcome={d.data.run.outcome} />
                      <span className="text-muted-foreground">{humanize(d.data.run.currentStage)}</span>
                    </div>
                  </div>
                )}
              </CardHeader>
              <CardContent className="space-y-4">
                <section>
                  <h3 className="mb-1 text-sm font-semibold">Cost</h3>
                  {d.data ? (
                    <p className="text-sm tabular-nums" data-testid="compare-cost">
                      {formatUsd(d.data.cost.usd)} · {d.data.cost.calls} calls · {formatTokens(d.data.cost.tokensIn + d.data.cost.tokensOut)} tokens
                    </p>
                  ) : (
                    <Skeleton className="h-4 w-24" />
                  )}
                </section>
                <section>
                  <h3 className="mb-1 text-sm font-semibold">Plan{plan ? ` v${plan.version}` : ""}</h3>
                  {plan ? (
                    <div className="space-y-2">
                      {plan.plan.summary && (
                        <p className="text-xs" data-testid="compare-plan-summary">
                          {plan.plan.summary}
                        </p>
                      )}
                      <div className="rounded-md border p-2">
                        <MermaidDiagram source={plan.plan.mermaid} label={`Approach ${i + 1} plan`} />
                      </div>
                      <ol className="list-decimal pl-5 text-xs">
                        {plan.plan.tasks.map((t) => (
                          <li key={t.id}>{t.title}</li>
                        ))}
                      </ol>
                    </div>
                  ) : eventsLoading ? (
                    <Skeleton className="h-24 w-full" data-testid="compare-loading" />
                  ) : (
                    <p className="text-muted-foreground text-sm">{ended ? "The run ended without a plan." : "No plan yet."}</p>
                  )}
                </section>
                <section>
                  <h3 className="mb-1 text-sm font-semibold">Validation</h3>
                  {validation ? (
                    <div className="space-y-1">
                      <p className="text-sm">
                        {validation.passed ? "Passed" : "Failed"}
                        {validation.score !== undefined ? ` · ${validation.score}/10` : ""}
                      </p>
                      {validation.report && (
                        <details className="text-xs">
                          <summary className="cursor-pointer">Report</summary>
                          <Markdown className="text-xs">{validation.report}</Markdown>
                        </details>
                      )}
                    </div>
                  ) : eventsLoading ? (
                    <Skeleton className="h-4 w-32" />
                  ) : (
                    <p className="text-muted-foreground text-sm">{ended ? "Not validated (the run ended before validation)." : "Not validated yet."}</p>
                  )}
                </section>
                <section>
                  <h3 className="mb-1 text-sm font-semibold">Diff</h3>
                  <BranchDiff runId={id} refreshKey={ev.at(-1)?.sequence ?? 0} />
                </section>
              </CardContent>
              <CardFooter className="flex flex-wrap gap-2">
                <Button
                  size="sm"
                  data-testid="pick-approach"
                  disabled={!d.data || busy !== null}
                  onClick={() => cancelOthers(id, () => router.push(`/runs/${id}`))}
                >
                  Pick this one
                </Button>
                <Button
                  size="sm"
                  variant="outline"
                  data-testid="cancel-others"
                  disabled={!d.data || busy !== null || othersActive(id).length === 0}
                  title={othersActive(id).length === 0 ? "The other approaches have already finished." : undefined}
                  onClick={() => cancelOthers(id)}
                >
                  Cancel the others
                </Button>
              </CardFooter>
            </Card>
          );
        })}
      </div>
    </div>
    </div>
  );
}
