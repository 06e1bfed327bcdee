import { Suspense } from "react";
import { RunsTable } from "@/components/runs/runs-table";
import { Skeleton } from "@/components/ui/skeleton";

export default function RunsPage() {
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">Runs</h1>
        <p className="text-muted-foreground text-sm">Every coding request, from plan to pull request.</p>
      </div>
      <Suspense fallback={<Skeleton className="h-40 w-full" />}>
        <RunsTable />
      </Suspense>
    </div>
  );
}
