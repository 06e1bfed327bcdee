"use client";

import Link from "next/link";
import { usePathname, useRouter, useSearchParams } from "next/navigation";
import { useEffect, useMemo, useState } from "react";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { Search } from "lucide-react";
import { Button } from "@/components/ui/button";
import { Card, CardContent } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { Select, SelectContent, SelectItem, SelectTrigger, SelectValue } from "@/components/ui/select";
import { Skeleton } from "@/components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { isRunFilter, RUN_FILTER_KEYS, RUN_FILTERS, runsQuery, type RunFilter } from "@/lib/dashboard/filters";
import { formatUsd, humanize } from "@/lib/dashboard/format";
import { approachLabel, approachOf } from "@/lib/runs/approach";
import { Age } from "@/components/layout/client-time";
import { cn } from "@/lib/utils";
import { apiGet, runKeys, type Run, type RunCost } from "./api";
import { StatusBadge } from "./status-badge";
import { useProjects } from "./use-projects";

const PAGE_SIZE = 25;
const ALL_PROJECTS = "__all";

type Page = { runs: Run[]; nextCursor: string | null };

/** The runs list: quick filters, project, search (all in the URL, so a filtered view can be shared), live, paged. */
export function RunsTable() {
  const router = useRouter();
  const pathname = usePathname();
  const params = useSearchParams();
  const filterParam = params.get("filter");
  const filter: RunFilter = isRunFilter(filterParam) ? filterParam : "all";
  const projectId = params.get("project");
  const q = params.get("q") ?? "";
  const [search, setSearch] = useState(q);

  const setParam = (changes: Record<string, string | null>) => {
    const next = new URLSearchParams(params.toString());
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v);
      else next.delete(k);
    }
    const s = next.toString();
    router.replace(s ? `${pathname}?${s}` : pathname, { scroll: false });
  };

  // Search as you type, once typing pauses.
  useEffect(() => {
    if (search === q) return;
    const timer = setTimeout(() => setParam({ q: search.trim() || null }), 300);
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search]);

  const limitParam = Number(params.get("limit"));
  const limit = Number.isInteger(limitParam) && limitParam >= 5 && limitParam <= 100 ? limitParam : PAGE_SIZE;
  const query = runsQuery({ filter, projectId, q, limit });
  const runs = useInfiniteQuery({
    queryKey: runKeys.list(query),
    queryFn: ({ pageParam }) => apiGet<Page>(`/api/runs?${query}${pageParam ? `&cursor=${encodeURIComponent(pageParam)}` : ""}`),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.nextCursor,
    refetchInterval: 3_000,
  });
  const rows = useMemo(() => runs.data?.pages.flatMap((p) => p.runs) ?? [], [runs.data]);
  const ids = rows.map((r) => r.id).join(",");
  const costs = useQuery({
    queryKey: ["run-costs", ids],
    queryFn: () => apiGet<{ costs: Record<string, RunCost> }>(`/api/run-costs?ids=${ids}`).then((b) => b.costs),
    enabled: ids.length > 0,
    refetchInterval: 5_000,
    placeholderData: (previous) => previous,
  });
  const projects = useProjects();
  const projectName = (id: string) => projects.data?.find((p) => p.id === id)?.name ?? "—";
  const filtered = filter !== "all" || !!projectId || !!q;

  return (
    <div className="space-y-4">
      <div className="flex flex-col gap-3 md:flex-row md:items-end">
        <div role="group" aria-label="Filter runs by status" className="bg-muted inline-flex w-fit flex-wrap rounded-lg p-[3px]">
          {RUN_FILTER_KEYS.map((key) => (
            <button
              key={key}
              type="button"
              aria-pressed={filter === key}
              data-testid={`filter-${key}`}
              onClick={() => setParam({ filter: key === "all" ? null : key })}
              className={cn(
                "focus-visible:ring-ring/50 rounded-md px-3 py-1 text-sm font-medium outline-none focus-visible:ring-[3px]",
                filter === key ? "bg-background text-foreground shadow-sm dark:bg-input/30" : "text-muted-foreground hover:text-foreground",
              )}
            >
              {RUN_FILTERS[key].label}
            </button>
          ))}
        </div>
        <div className="flex flex-1 flex-col gap-3 sm:flex-row md:justify-end">
          <div className="grid gap-1.5">
            <Label htmlFor="runs-project" className="sr-only">
              Project
            </Label>
            <Select value={projectId ?? ALL_PROJECTS} onValueChange={(v) => setParam({ project: v === ALL_PROJECTS ? null : v })}>
              <SelectTrigger id="runs-project" className="w-full sm:w-48" aria-label="Project" data-testid="filter-project">
                <SelectValue placeholder="All projects" />
              </SelectTrigger>
              <SelectContent>
                <SelectItem value={ALL_PROJECTS}>All projects</SelectItem>
                {projects.data?.map((p) => (
                  <SelectItem key={p.id} value={p.id}>
                    {p.name}
                  </SelectItem>
                ))}
              </SelectContent>
            </Select>
          </div>
          <div className="relative w-full sm:w-64">
            <Search className="text-muted-foreground pointer-events-none absolute top-2.5 left-2.5 size-4" aria-hidden />
            <Input
              type="search"
              aria-label="Search requests"
              placeholder="Search requests…"
              className="pl-8"
              value={search}
              onChange={(e) => setSearch(e.target.value)}
              data-testid="runs-search"
            />
          </div>
        </div>
      </div>

      {runs.isPending ? (
        <div className="space-y-2" aria-busy="true" aria-label="Loading runs">
          {Array.from({ length: 5 }, (_, i) => (
            <Skeleton key={i} className="h-10 w-full" />
          ))}
        </div>
      ) : runs.error ? (
        <p role="alert" className="text-destructive text-sm">
          Could not load runs: {runs.error.message} Check that the server is running, then reload the page.
        </p>
      ) : rows.length === 0 ? (
        <Card data-testid="runs-empty">
          <CardContent className="text-muted-foreground flex flex-col items-start gap-3 text-sm">
            {filtered ? (
              <>
                <p>No runs match these filters.</p>
                <Button variant="outline" size="sm" onClick={() => { setSearch(""); setParam({ filter: null, project: null, q: null }); }}>
                  Clear filters
                </Button>
              </>
            ) : projects.data?.length === 0 ? (
              <>
                <p>No projects yet. A run works on a project&apos;s repository: create a project first.</p>
                <Button asChild size="sm">
                  <Link href="/projects">Create a project</Link>
                </Button>
              </>
            ) : (
              <>
                <p>No runs yet. Describe a change and Gatehouse plans it, waits for your approval, implements and validates it.</p>
                <Button asChild size="sm">
                  <Link href="/runs/new">Start a run</Link>
                </Button>
              </>
            )}
          </CardContent>
        </Card>
      ) : (
        <>
          <div className="overflow-x-auto rounded-md border">
            <Table data-testid="runs-table">
              <TableHeader>
                <TableRow>
                  <TableHead>Run</TableHead>
                  <TableHead>Status</TableHead>
                  <TableHead className="hidden md:table-cell">Stage</TableHead>
                  <TableHead className="hidden md:table-cell">Project</TableHead>
                  <TableHead className="text-right">Age</TableHead>
                  <TableHead className="hidden text-right sm:table-cell">Cost</TableHead>
                </TableRow>
              </TableHeader>
              <TableBody>
                {rows.map((run) => {
                  // The approaches of one "explore N" request share a title: each row says which approach it is.
                  const approach = approachOf(run.originalRequest);
                  return (
                  <TableRow key={run.id} data-testid="run-row" data-run-id={run.id}>
                    <TableCell className="max-w-[16rem] truncate md:max-w-md">
                      <Link href={`/runs/${run.id}`} className="hover:underline focus-visible:underline" title={run.title} data-testid="run-title">
                        {run.title}
                      </Link>
                      {approach && (
                        <span className="text-muted-foreground ml-2 text-xs" data-testid="run-approach">
                          {approachLabel(approach)}
                        </span>
                      )}
                    </TableCell>
                    <TableCell>
                      <StatusBadge status={run.status} outcome={run.outcome} />
                    </TableCell>
                    <TableCell className="text-muted-foreground hidden md:table-cell">{humanize(run.currentStage)}</TableCell>
                    <TableCell className="text-muted-foreground hidden max-w-[10rem] truncate md:table-cell">{projectName(run.projectId)}</TableCell>
                    <TableCell className="text-muted-foreground text-right tabular-nums"><Age iso={run.createdAt} tickMs={5_000} /></TableCell>
                    <TableCell className="text-muted-foreground hidden text-right tabular-nums sm:table-cell" data-testid="run-cost">
                      {costs.data?.[run.id] ? formatUsd(costs.data[run.id]!.usd) : "—"}
                    </TableCell>
                  </TableRow>
                  );
                })}
              </TableBody>
            </Table>
          </div>
          {runs.hasNextPage && (
            <div className="flex justify-center">
              <Button variant="outline" onClick={() => runs.fetchNextPage()} disabled={runs.isFetchingNextPage} data-testid="load-more">
                {runs.isFetchingNextPage ? "Loading…" : "Load more"}
              </Button>
            </div>
          )}
        </>
      )}
    </div>
  );
}
