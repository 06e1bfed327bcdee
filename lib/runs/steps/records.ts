import { asc, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { artifacts, clarificationRequests, gates, modelCalls } from "@/lib/db/schema";
import { listEvents } from "@/lib/db/event-store";
import { redact } from "@/lib/redact";
import { buildRunContext, clarificationFromRow, commitRunRecords, readRunContext } from "@/lib/git";
import type { RunRows } from "@/lib/git/records";
import { workflowClock, type RunContext } from "./context";

/* The run's records on its branch (.autonomous/runs/<id>/), and what they and the project memory say of it. */

/**
 * Commit the run's records on its branch. `completing`: these are the records a squash merge carries into the base
 * branch before the run's last step appends RUN_COMPLETED, so they already say what the run is when it lands there.
 */
export async function writeRecords(run: RunContext, validationReport: string | null, { completing = false }: { completing?: boolean } = {}) {
  // A delivery step run again after a crash (killed while its push, pull request or merge was in flight) finds the
  // records it wrote already saying "completed": written again they would differ only by the events its first try
  // appended and the time, and land as a second record commit on a branch that may already be pushed or merging.
  if (completing) {
    const onBranch = await readRunContext({ repoPath: run.repoPath, ref: `refs/heads/${run.branch}`, runId: run.runId }).catch(() => null);
    if (onBranch?.status === "completed") return null;
  }
  const events = await listEvents({ runId: run.runId, limit: 100_000 });
  const db = await getDb();
  const rows = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.runId));
  const built = buildRunContext({
    events,
    clarifications: rows.map((r) => clarificationFromRow(r)),
    baseBranch: run.config.git.baseBranch,
    rows: await runRows(run.runId),
  });
  const context = completing ? { ...built, status: "completed", completedAt: built.completedAt ?? workflowClock.now() } : built;
  return commitRunRecords({ repoPath: run.repoPath, branch: run.branch, context, validationReport, events });
}

/** A row as context.json keeps it: Dates as epoch ms (rebuildFromGit turns them back). */
const plainRow = (row: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v instanceof Date ? v.getTime() : v])) as Record<string, unknown>;

/** The run's gates, model calls and artifact rows, for context.json (what the event log does not carry). */
async function runRows(runId: string): Promise<RunRows> {
  const db = await getDb();
  const [gateRows, callRows, artifactRows] = await Promise.all([
    db.select().from(gates).where(eq(gates.workflowRunId, runId)).orderBy(asc(gates.gateNumber)),
    db.select().from(modelCalls).where(eq(modelCalls.workflowRunId, runId)).orderBy(asc(modelCalls.createdAt), asc(modelCalls.id)),
    db.select().from(artifacts).where(eq(artifacts.workflowRunId, runId)).orderBy(asc(artifacts.createdAt), asc(artifacts.id)),
  ]);
  return { gates: gateRows.map(plainRow), modelCalls: callRows.map(plainRow), artifacts: artifactRows.map(plainRow) };
}

export async function lastValidationReport(runId: string): Promise<string | null> {
  const events = await listEvents({ runId, limit: 100_000 });
  const last = [...events].reverse().find((e) => e.type === "VALIDATION_PASSED" || e.type === "VALIDATION_FAILED");
  if (last?.type === "VALIDATION_PASSED" || last?.type === "VALIDATION_FAILED") return last.payload.report ?? null;
  return null;
}

export async function decisionsOf(runId: string): Promise<string[]> {
  const db = await getDb();
  const rows = await db.select().from(gates).where(eq(gates.workflowRunId, runId)).orderBy(asc(gates.gateNumber));
  return rows
    .filter((g) => g.status !== "pending")
    .map((g) => `${g.kind} gate ${g.gateNumber}: ${g.decision ?? g.status}${g.notes ? ` — ${redact(g.notes).slice(0, 300)}` : ""}`);
}
