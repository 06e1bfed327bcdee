import { CompareView } from "@/components/runs/compare-view";

export default async function ComparePage({ searchParams }: { searchParams: Promise<{ runs?: string }> }) {
  const { runs } = await searchParams;
  const runIds = [...new Set((runs ?? "").split(",").map((s) => s.trim()).filter(Boolean))].slice(0, 6);
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">Compare approaches</h1>
        <p className="text-muted-foreground text-sm">The same request, several runs: plans, diffs, validation and cost side by side.</p>
      </div>
      <CompareView runIds={runIds} />
    </div>
  );
}
