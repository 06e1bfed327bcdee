"use client";

import { useQuery } from "@tanstack/react-query";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { apiGet, runKeys, type CostBreakdown, type ModelCall, type RunCost } from "@/components/runs/api";
import { formatTokens, formatUsd } from "@/lib/dashboard/format";

export function ModelCalls({
  runId,
  cost,
  refreshKey,
}: {
  runId: string;
  cost: RunCost & { byStage?: CostBreakdown[]; byModel?: CostBreakdown[]; byTask?: CostBreakdown[] };
  refreshKey: number;
}) {
  const { data, error } = useQuery({
    queryKey: [...runKeys.modelCalls(runId), refreshKey],
    queryFn: () => apiGet<{ modelCalls: ModelCall[] }>(`/api/runs/${runId}/model-calls`).then((b) => b.modelCalls),
    placeholderData: (previous) => previous,
  });
  return (
    <div className="space-y-3" data-testid="model-calls">
      <dl className="grid grid-cols-2 gap-3 sm:grid-cols-4">
        {[
          ["Cost", formatUsd(cost.usd)],
          ["Calls", String(cost.calls)],
          ["Tokens in", formatTokens(cost.tokensIn)],
          ["Tokens out", formatTokens(cost.tokensOut)],
        ].map(([k, v]) => (
          <div key={k} className="rounded-md border p-2">
            <dt className="text-muted-foreground text-xs">{k}</dt>
            <dd className="text-lg font-semibold tabular-nums">{v}</dd>
          </div>
        ))}
      </dl>
      {(cost.byStage?.length ?? 0) > 0 && (
        <div className="grid gap-3 sm:grid-cols-2">
          <Subtotals title="By stage" testId="cost-by-stage" rows={(cost.byStage ?? []).map((r) => ({ label: r.stage ?? "?", ...r }))} />
          <Subtotals title="By model" testId="cost-by-model" rows={(cost.byModel ?? []).map((r) => ({ label: r.model ?? "?", ...r }))} />
          {(cost.byTask?.length ?? 0) > 0 && (
            <Subtotals title="By parallel task" testId="cost-by-task" rows={(cost.byTask ?? []).map((r) => ({ label: r.taskId ?? "?", ...r }))} />
          )}
        </div>
      )}
      {error && <p className="text-destructive text-sm">Could not load model calls: {error.message}</p>}
      {data && data.length === 0 && <p className="text-muted-foreground text-sm">No model calls yet.</p>}
      {data && data.length > 0 && (
        <div className="overflow-x-auto rounded-md border">
          <Table>
            <TableHeader>
              <TableRow>
                <TableHead>Stage</TableHead>
                <TableHead>Model</TableHead>
                <TableHead className="text-right">In</TableHead>
                <TableHead className="text-right">Out</TableHead>
                <TableHead className="text-right">Cost</TableHead>
                <TableHead className="text-right">Latency</TableHead>
                <TableHead>Status</TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {data.map((c) => (
                <TableRow key={c.id}>
                  <TableCell>{c.stage}</TableCell>
                  <TableCell className="font-mono text-xs">
                    {c.model}
                    {c.model.startsWith("demo:") && <span className="text-muted-foreground"> (scripted)</span>}
                  </TableCell>
                  <TableCell className="text-right tabular-nums">{formatTokens(c.tokensIn)}</TableCell>
                  <TableCell className="text-right tabular-nums">{formatTokens(c.tokensOut)}</TableCell>
                  <TableCell className="text-right tabular-nums">{formatUsd(c.costUsd)}</TableCell>
                  <TableCell className="text-right tabular-nums">{c.latencyMs} ms</TableCell>
                  <TableCell title={c.error ?? undefined}>{c.status}</TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        </div>
      )}
    </div>
  );
}

function Subtotals({ title, rows, testId }: { title: string; testId: string; rows: Array<RunCost & { label: string }> }) {
  return (
    <div className="rounded-md border" data-testid={testId}>
      <Table>
        <TableHeader>
          <TableRow>
            <TableHead>{title}</TableHead>
            <TableHead className="text-right">Calls</TableHead>
            <TableHead className="text-right">Tokens</TableHead>
            <TableHead className="text-right">Cost</TableHead>
          </TableRow>
        </TableHeader>
        <TableBody>
          {rows.map((r) => (
            <TableRow key={r.label}>
              <TableCell className="font-mono text-xs">{r.label}</TableCell>
              <TableCell className="text-right tabular-nums">{r.calls}</TableCell>
              <TableCell className="text-right tabular-nums">{formatTokens(r.tokensIn + r.tokensOut)}</TableCell>
              <TableCell className="text-right tabular-nums">{formatUsd(r.usd)}</TableCell>
            </TableRow>
          ))}
        </TableBody>
      </Table>
    </div>
  );
}
