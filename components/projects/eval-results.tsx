"use client";

import { useQuery } from "@tanstack/react-query";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { apiGet } from "@/components/runs/api";
import type { EvalReport } from "@/lib/evals/results";

/**
 * A project's past eval rounds (`npm run eval`, kept under the data directory — see README "Measuring the agents"),
 * newest first: per routing solved / cost / tokens / time / interventions, and the per-task rows behind it.
 */
export function EvalResults({ projectId }: { projectId: string }) {
  const evals = useQuery({
    queryKey: ["projects", projectId, "evals"],
    queryFn: () => apiGet<{ evals: EvalReport[] }>(`/api/projects/${projectId}/evals`),
  });
  if (evals.error) return <p className="text-destructive text-sm">{evals.error.message}</p>;
  if (!evals.data) return <p className="text-muted-foreground text-sm">Loading…</p>;
  if (!evals.data.evals.length) {
    return (
      <p className="text-muted-foreground text-sm" data-testid="eval-results-empty">
        No eval results yet: run <code>npm run eval -- --from-history {projectId}</code> (or add <code>--project {projectId}</code>).
      </p>
    );
  }
  return (
    <div className="space-y-4" data-testid="eval-results">
      {evals.data.evals.map((report) => (
        <div key={report.at} className="space-y-2">
          <h4 className="text-xs font-semibold">{new Date(report.at).toLocaleString()}</h4>
          <Table>
            <TableHeader>
              <TableRow>
                <TableHead>Routing</TableHead>
                <TableHead>Solved</TableHead>
                <TableHead>Cost $</TableHead>
                <TableHead>Tokens</TableHead>
                <TableHead>Time s</TableHead>
                <TableHead>Interventions</TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {report.routings.map((r) => (
                <TableRow key={r.name}>
                  <TableCell className="font-mono text-xs break-all" title={`planner ${r.planner} · implementer ${r.implementer} · validator ${r.validator}`}>
                    {r.name}
                  </TableCell>
                  <TableCell>
                    {r.solved}/{r.tasks}
                  </TableCell>
                  <TableCell>{r.costUsd.toFixed(4)}</TableCell>
                  <TableCell>{r.tokens}</TableCell>
                  <TableCell>{r.seconds.toFixed(1)}</TableCell>
                  <TableCell>{r.interventions}</TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
          {report.demo && <p className="text-muted-foreground text-xs">{report.demo}</p>}
          <details>
            <summary className="cursor-pointer text-xs">Tasks ({report.tasks.length})</summary>
            <ul className="space-y-1 pt-1 text-xs">
              {report.tasks.map((t, i) => (
                <li key={`${t.id}:${t.routing}:${i}`} className="font-mono break-all">
                  {t.valid ? (t.solved ? "✓" : "✗") : "–"} {t.id} · {t.source}
                  {t.commit ? ` · ${t.commit.slice(0, 8)}` : ""}
                  {t.routing ? ` · ${t.routing}` : ""}
                  {t.valid ? ` · $${t.costUsd.toFixed(4)} · ${t.tokens} tokens · ${t.seconds.toFixed(1)} s · ${t.interventions} interventions` : ` · dropped: ${t.reason}`}
                </li>
              ))}
            </ul>
          </details>
        </div>
      ))}
    </div>
  );
}
