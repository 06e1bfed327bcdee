"use client";

import { useQuery } from "@tanstack/react-query";
import { Skeleton } from "@/components/ui/skeleton";
import { DiffView } from "@/components/runs/diff-view";
import { ApiRequestError, apiGet, runKeys } from "@/components/runs/api";

type DiffBody = { diff: string; base?: string; head?: string; truncated?: boolean; notes?: string[] };

/** The run branch's diff against its base, in a diff viewer; a clear empty state while there is none. */
export function BranchDiff({ runId, refreshKey }: { runId: string; refreshKey: number }) {
  const { data, error, isPending } = useQuery({
    queryKey: [...runKeys.diff(runId), refreshKey],
    queryFn: async (): Promise<DiffBody | null> => {
      try {
        return await apiGet<DiffBody>(`/api/runs/${runId}/diff`);
      } catch (e) {
        // No diff yet (nothing committed on the branch, or a server without the diff endpoint).
        if (e instanceof ApiRequestError && e.status === 404) return null;
        throw e;
      }
    },
    placeholderData: (previous) => previous,
  });
  if (isPending) return <Skeleton className="h-40 w-full" />;
  if (error) return <p className="text-destructive text-sm">Could not load the diff: {error.message}</p>;
  if (!data || !data.diff.trim()) {
    return (
      <p className="text-muted-foreground text-sm" data-testid="diff-empty">
        No changes on the run branch yet. The diff appears here once the implementer commits.
      </p>
    );
  }
  return (
    <div className="space-y-2">
      {(data.base || data.head) && (
        <p className="text-muted-foreground font-mono text-xs">
          {data.base?.slice(0, 12)} → {data.head?.slice(0, 12)}
        </p>
      )}
      <DiffView diff={data.diff} testId="branch-diff" />
      {!!data.notes?.length && (
        <ul className="text-muted-foreground list-disc pl-5 text-xs" data-testid="branch-diff-notes">
          {data.notes.map((note) => (
            <li key={note}>{note}</li>
          ))}
        </ul>
      )}
    </div>
  );
}
