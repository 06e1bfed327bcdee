"use client";

import { useQuery } from "@tanstack/react-query";
import { Card, CardContent } from "@/components/ui/card";
import { Skeleton } from "@/components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { StatusBadge } from "./status-badge";

type RunRow = {
  id: string;
  status: string;
  currentStage: string | null;
  originalRequest: string;
  createdAt: string;
};

async function fetchRuns(): Promise<{ runs: RunRow[]; nextCursor: string | null }> {
  const response = await fetch("/api/runs?limit=50", { headers: { accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body?.error?.message ?? `Could not load runs (${response.status})`);
  return body;
}

function age(iso: string): string {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}

export function RunsTable() {
  const { data, error, isPending } = useQuery({ queryKey: ["runs"], queryFn: fetchRuns, refetchInterval: 2_000 });

  if (isPending) {
    return (
      <div className="space-y-2" aria-busy="true">
        {Array.from({ length: 4 }, (_, i) => (
          <Skeleton key={i} className="h-10 w-full" />
        ))}
      </div>
    );
  }
  if (error) {
    return (
      <p role="alert" className="text-destructive text-sm">
        {error.message}. Check that the server is running, then reload.
      </p>
    );
  }
  if (data.runs.length === 0) {
    return (
      <Card data-testid="runs-empty">
        <CardContent className="text-muted-foreground text-sm">
          No runs yet. Create a project and start a run with <code>POST /api/runs</code>.
        </CardContent>
      </Card>
    );
  }
  return (
    <Table data-testid="runs-table">
      <TableHeader>
        <TableRow>
          <TableHead>Request</TableHead>
          <TableHead>Status</TableHead>
          <TableHead>Stage</TableHead>
          <TableHead className="text-right">Age</TableHead>
        </TableRow>
      </TableHeader>
      <TableBody>
        {data.runs.map((run) => (
          <TableRow key={run.id} data-testid="run-row">
            <TableCell className="max-w-md truncate">{run.originalRequest}</TableCell>
            <TableCell>
              <StatusBadge status={run.status} />
            </TableCell>
            <TableCell className="text-muted-foreground">{run.currentStage ?? "—"}</TableCell>
            <TableCell className="text-muted-foreground text-right">{age(run.createdAt)}</TableCell>
          </TableRow>
        ))}
      </TableBody>
    </Table>
  );
}
