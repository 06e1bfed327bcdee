import { CompareGroup, CompareView } from "@/components/runs/compare-view";

/** /compare?runs=id1,id2 (the runs named), or /compare?group=<groupId> (the runs POST /api/runs started together). */
export default async function ComparePage({ searchParams }: { searchParams: Promise<{ runs?: string; group?: string }> }) {
  const { runs, group } = await searchParams;
  const runIds = [...new Set((runs ?? "").split(",").map((s) => s.trim()).filter(Boolean))].slice(0, 6);
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">Compare approaches</h1>
        <p className="text-muted-foreground text-sm">The same request, several runs: plans, diffs, validation and cost side by side.</p>
      </div>
      {runIds.length === 0 && group ? <CompareGroup groupId={group} /> : <CompareView runIds={runIds} />}
    </div>
  );
}
