"use client";

import { useEffect, useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { GitMerge } from "lucide-react";
import { Button } from "@/components/ui/button";
import { apiGet, runKeys } from "@/components/runs/api";
import type { ApiEvent } from "@/lib/dashboard/timeline";
import type { MergePreviewDto } from "@/lib/runs/merge-preview";
import { useDecision } from "./use-decision";

type File = MergePreviewDto["changes"][number];

const lines = (f: File) => (f.added === null ? "binary" : `+${f.added} −${f.removed}`);

function FileList({ files, testId }: { files: File[]; testId: string }) {
  return (
    <ul className="max-h-48 overflow-y-auto font-mono text-xs" data-testid={testId}>
      {files.map((f) => (
        <li key={f.path} className="flex justify-between gap-3">
          <span className="truncate" title={f.path}>
            {f.path}
          </span>
          <span className="text-muted-foreground shrink-0 tabular-nums">{lines(f)}</span>
        </li>
      ))}
    </ul>
  );
}

/** What the merge lands, read when the person asks to merge: the run's changes and Gatehouse's .autonomous/ records. */
function MergePreview({ preview }: { preview: MergePreviewDto }) {
  if (preview.kind === "pull_request") {
    return <p className="text-sm">The pull request is squash-merged into {preview.base} on GitHub; its Files tab lists what lands.</p>;
  }
  if (preview.status !== "ready") {
    return <p className="text-sm">{preview.status === "up_to_date" ? `${preview.base} already has everything on ${preview.branch}.` : `Cannot merge now: ${preview.reason}`}</p>;
  }
  const total = preview.changes.length + preview.records.length;
  return (
    <div className="space-y-2 text-sm" data-testid="merge-preview">
      <p>
        One squash commit on <strong>{preview.base}</strong> with {total} file{total === 1 ? "" : "s"} (+{preview.added} −{preview.removed} lines):
      </p>
      <p className="font-medium">The run&apos;s changes ({preview.changes.length}, as in the Diff tab)</p>
      <FileList files={preview.changes} testId="merge-preview-changes" />
      {preview.records.length > 0 && (
        <>
          <p className="font-medium">Gatehouse&apos;s records in .autonomous/ ({preview.records.length}: plan, run context, events, reports)</p>
          <FileList files={preview.records} testId="merge-preview-records" />
        </>
      )}
    </div>
  );
}

/**
 * A person's merge decision on a finished run. The first click shows what will land (every file of the squash commit,
 * .autonomous/ records included) and asks once; after confirming, the button follows the run's events until the merge
 * is made (the card turns into "merged") or fails (the reason shows): the run's own event stream ended with the run.
 */
export function MergeButton({ runId, base }: { runId: string; base: string }) {
  const merge = useDecision(runId);
  const queryClient = useQueryClient();
  const [asking, setAsking] = useState(false);
  const [following, setFollowing] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const preview = useQuery({
    queryKey: [...runKeys.detail(runId), "merge-preview"],
    queryFn: () => apiGet<{ preview: MergePreviewDto }>(`/api/runs/${runId}/merge`).then((b) => b.preview),
    enabled: asking,
    staleTime: 0,
  });
  useEffect(() => {
    if (!following) return;
    const started = Date.now();
    const timer = setInterval(async () => {
      const { events } = await apiGet<{ events: ApiEvent[] }>(`/api/runs/${runId}/events`).catch(() => ({ events: [] as ApiEvent[] }));
      const last = events.filter((e) => e.type === "MERGE_DECIDED" || e.type === "MERGE_FAILED" || e.type === "PR_MERGED").at(-1);
      if (last?.type === "PR_MERGED" || last?.type === "MERGE_FAILED" || Date.now() - started > 120_000) {
        setFollowing(false);
        if (last?.type === "MERGE_FAILED") setFailure(String(last.payload.reason ?? "the merge could not be made"));
        await queryClient.invalidateQueries({ queryKey: runKeys.detail(runId) });
      }
    }, 1_000);
    return () => clearInterval(timer);
  }, [following, runId, queryClient]);
  const blocked = preview.data?.kind === "local" && preview.data.status !== "ready";
  const count = preview.data ? preview.data.changes.length + preview.data.records.length : 0;
  return (
    <div className="space-y-2">
      {asking && !following ? (
        <div className="bg-background space-y-3 rounded-md border p-3" data-testid="merge-confirm">
          {preview.isPending ? (
            <p className="text-muted-foreground text-sm">Reading what the merge would land…</p>
          ) : preview.error ? (
            <p className="text-destructive text-sm">Could not read what the merge would land: {preview.error.message}</p>
          ) : (
            <MergePreview preview={preview.data} />
          )}
          <div className="flex flex-wrap gap-2">
            <Button
              size="sm"
              data-testid="confirm-merge"
              disabled={merge.isPending || preview.isPending || !!preview.error || blocked}
              onClick={() => {
                setFailure(null);
                merge.mutate(
                  { url: `/api/runs/${runId}/merge`, success: `Merge into ${base} decided` },
                  { onSuccess: () => setFollowing(true), onSettled: () => setAsking(false) },
                );
              }}
            >
              <GitMerge className="size-3.5" aria-hidden />
              {preview.data?.kind === "local" && count > 0 ? `Merge ${count} file${count === 1 ? "" : "s"} into ${base}` : `Merge into ${base}`}
            </Button>
            <Button size="sm" variant="ghost" data-testid="cancel-merge" onClick={() => setAsking(false)}>
              Not now
            </Button>
          </div>
        </div>
      ) : (
        <Button size="sm" data-testid="merge-run" disabled={merge.isPending || following} onClick={() => setAsking(true)}>
          <GitMerge className="size-3.5" aria-hidden />
          {following ? `Merging into ${base}…` : `Merge into ${base}…`}
        </Button>
      )}
      {merge.error && <p className="text-destructive text-xs">{merge.error.message}</p>}
      {failure && (
        <p className="text-destructive text-xs" data-testid="merge-failed">
          Not merged: {failure}
        </p>
      )}
    </div>
  );
}
