import { and, eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { eventTypeIn } from "@/lib/db/event-store";
import { workflowEvents } from "@/lib/db/schema";
import { redact } from "@/lib/redact";
import { triageTask, type TriageEvidence, type TriageResult } from "@/lib/agents/triage";
import { attachSandbox, hasWorkspace } from "@/lib/sandbox";
import { rollbackToCheckpoint } from "@/lib/git";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { append, loadRun, type RunContext } from "./context";
import { checkTasksFile } from "./tasks-file";
import { filesInBranch, filesPresent, workspaceChanged } from "./triage-files";
import { runSandbox } from "./workspace";

/* Triage, once before the first implementation: tasks the repository already does are skipped. */

/** How long one triage check may run. */
const TRIAGE_CHECK_MS = 120_000;

/**
 * Triage (lib/agents/triage.ts): each task's own checks run in the sandbox and its files are looked for; a task found
 * done at or above `triage.threshold` is skipped (TASK_TRIAGED, and checked in the run's tasks.md). What the checks
 * leave in the workspace is dropped, so the first checkpoint holds only the implementer's work.
 */
export async function triage({
  runId,
  plan: doc,
  run: known,
}: {
  runId: string;
  plan: PlanDocument;
  /**
   * The run as the workflow already has it (its `load` step, with the branch its `branch` step made): config and
   * repository are fixed at the run's creation, so they need not be read again on the way to implementation.
   */
  run?: RunContext;
}): Promise<{ skip: Array<{ id: string; evidence: string[] }> }> {
  const candidates = doc.tasks.filter((t) => (t.checks ?? []).length || (t.files ?? []).length);
  if (!candidates.length) return { skip: [] };
  const withChecks = candidates.some((t) => (t.checks ?? []).length);
  const run = known ?? (await loadRun({ runId }));
  // Nothing to run and no workspace yet: the files are looked up in the run branch's tree, which is exactly what a
  // sandbox checked out now would hold (no worktree made, no sandboxed process); asked alongside the next read.
  const fromTree = !withChecks && !hasWorkspace(runId) ? filesInBranch(run, candidates.flatMap((t) => t.files ?? [])).catch(() => null) : null;
  // A run already implementing (its workflow replayed by a newer server) is not triaged: it would disturb its work.
  if (await implementationStarted(runId)) return { skip: [] };
  const threshold = run.config.triage?.threshold ?? 0.8;
  let results: TriageResult[];
  const present = await fromTree;
  if (present) {
    results = candidates.map((task) => {
      const files = (task.files ?? []).map((path) => ({ path, present: present.get(path)! }));
      return triageTask({ taskId: task.id, evidence: { checks: [], files }, threshold });
    });
    // Without checks no task reaches the default threshold; a lower one may skip a task on its files alone.
    await checkTasksFile(run, doc, results.filter((r) => r.skipped).map((r) => r.taskId));
  } else {
    // The tree cannot tell (a symbolic link on a path's way), or there is something to run: the sandbox is asked.
    results = [];
    const sandbox = await attachSandbox(runSandbox(run));
    for (const task of candidates) {
      const checks: TriageEvidence["checks"] = [];
      for (const command of task.checks ?? []) {
        const r = await sandbox.exec("sh", ["-c", command], { timeoutMs: TRIAGE_CHECK_MS });
        checks.push({ command, exitCode: r.timedOut ? null : r.exitCode, output: redact(`${r.stdout}\n${r.stderr}`) });
      }
      const files = await filesPresent(sandbox, task.files ?? []);
      results.push(triageTask({ taskId: task.id, evidence: { checks, files }, threshold }));
    }
    // Checks may have changed the workspace (presence tests do not): what they left is dropped. A workspace they left
    // as it was (the usual case: checks read) is not reset, which costs several git calls.
    if (withChecks && (await workspaceChanged(sandbox).catch(() => true))) await rollbackToCheckpoint({ sandbox }).catch(() => null);
    await checkTasksFile(run, doc, results.filter((r) => r.skipped).map((r) => r.taskId), sandbox);
  }
  const verdicts: NewRunEvent[] = results
    .filter((r) => r.confidence > 0)
    .map((r) => ({ type: "TASK_TRIAGED", payload: { taskId: r.taskId, confidence: r.confidence, evidence: r.evidence, skipped: r.skipped } }));
  if (verdicts.length) await append(runId, "triage", verdicts);
  return { skip: results.filter((r) => r.skipped).map((r) => ({ id: r.taskId, evidence: r.evidence })) };
}

/** Whether the run's implementation stage has started: one read of the (run, type) index, not of the whole log. */
async function implementationStarted(runId: string): Promise<boolean> {
  const db = await getDb();
  const rows = await db
    .select({ sequence: workflowEvents.sequence })
    .from(workflowEvents)
    .where(
      and(
        eq(workflowEvents.workflowRunId, runId),
        eventTypeIn(["STAGE_STARTED"]),
        sql`json_extract(${workflowEvents.payload}, '$.stage') = 'implementation'`,
      ),
    )
    .limit(1);
  return rows.length > 0;
}
