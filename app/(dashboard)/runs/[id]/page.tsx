import { notFound } from "next/navigation";
import { requirePageUser } from "@/app/_server/session";
import { RunView, type RunSnapshot } from "@/components/run/run-view";
import { AppError } from "@/lib/errors";
import { getRunSnapshot } from "@/lib/runs/service";

export default async function RunPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const user = await requirePageUser(`/runs/${id}`);
  // A run that does not exist (or that this user may not see) is a real 404, not a page that fails to load it.
  // The page renders from one snapshot (the run and its events up to the same sequence), then streams from there.
  let snapshot: RunSnapshot;
  try {
    snapshot = (await getRunSnapshot({ user, runId: id })) as unknown as RunSnapshot;
  } catch (error) {
    if (error instanceof AppError && error.status === 404) notFound();
    throw error;
  }
  return <RunView runId={id} initial={snapshot} />;
}
