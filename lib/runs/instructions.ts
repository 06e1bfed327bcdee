import { and, asc, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { workflowEvents } from "@/lib/db/schema";

export type RunInstructionFile = { path: string; bytes: number; sha: string; cut: boolean; stages: string[] };

/**
 * The repository instructions a run's prompts quoted (its INSTRUCTIONS_LOADED events), one entry per file version
 * (path and sha) with the stages that read it: GET /api/runs/:id `instructions`, the run page's list.
 */
export async function instructionsOfRun({ runId }: { runId: string }): Promise<RunInstructionFile[]> {
  const db = await getDb();
  const rows = await db
    .select({ payload: workflowEvents.payload })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, runId), eq(workflowEvents.type, "INSTRUCTIONS_LOADED")))
    .orderBy(asc(workflowEvents.sequence));
  const byKey = new Map<string, RunInstructionFile>();
  for (const row of rows) {
    const { stage, files } = row.payload as { stage: string; files: Array<{ path: string; bytes: number; sha: string; shown: number }> };
    for (const f of files ?? []) {
      const key = `${f.path}\0${f.sha}`;
      const entry = byKey.get(key) ?? { path: f.path, bytes: f.bytes, sha: f.sha, cut: false, stages: [] };
      entry.cut ||= f.shown < f.bytes;
      if (!entry.stages.includes(stage)) entry.stages.push(stage);
      byKey.set(key, entry);
    }
  }
  return [...byKey.values()];
}
