import { listEvents } from "@/lib/db/event-store";
import { redact } from "@/lib/redact";
import { triageTask, type TriageEvidence, type TriageResult } from "@/lib/agents/triage";
import { attachSandbox } from "@/lib/sandbox";
import { rollbackToCheckpoint } from "@/lib/git";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { append, loadRun } from "./context";
import { checkTasksFile } from "./tasks-file";
import { sandboxOptions } from "./workspace";

/* Triage, once before the first implementation: tasks the repository already does are skipped. */

/** How long one triage check may run. */
const TRIAGE_CHECK_MS = 120_000;

/**
 * Triage (lib/agents/triage.ts): each task's own checks run in the sandbox and its files are looked for; a task found
 * done at or above `triage.threshold` is skipped (TASK_TRIAGED, and checked in the run's tasks.md). What the checks
 * leave in the workspace is dropped, so the first checkpoint holds only the implementer's work.
 */
export async function triage({ runId, plan: doc }: { runId: string; plan: PlanDocument }): Promise<{ skip: Array<{ id: string; evidence: string[] }> }> {
  const run = await loadRun({ runId });
  // A run already implementing (its workflow replayed by a newer server) is not triaged: it would disturb its work.
  const events = await listEvents({ runId, limit: 100_000 });
  if (events.some((e) => e.type === "STAGE_STARTED" && (e.payload as { stage?: string }).stage === "implementation")) return { skip: [] };
  const threshold = run.config.triage?.threshold ?? 0.8;
  const candidates = doc.tasks.filter((t) => (t.checks ?? []).length || (t.files ?? []).length);
  if (!candidates.length) return { skip: [] };
  const sandbox = await attachSandbox(await sandboxOptions(run));
  const results: TriageResult[] = [];
  for (const task of candidates) {
    const checks: TriageEvidence["checks"] = [];
    for (const command of task.checks ?? []) {
      const r = await sandbox.exec("sh", ["-c", command], { timeoutMs: TRIAGE_CHECK_MS });
      checks.push({ command, exitCode: r.timedOut ? null : r.exitCode, output: redact(`${r.stdout}\n${r.stderr}`) });
    }
    const files = await filesPresent(sandbox, task.files ?? []);
    results.push(triageTask({ taskId: task.id, evidence: { checks, files }, threshold }));
  }
  // Checks may have changed the workspace; presence tests alone do not (and resetting costs several git calls).
  if (candidates.some((t) => (t.checks ?? []).length)) await rollbackToCheckpoint({ sandbox }).catch(() => null);
  const skipped = results.filter((r) => r.skipped);
  await checkTasksFile(run, doc, skipped.map((r) => r.taskId), sandbox);
  const verdicts: NewRunEvent[] = results
    .filter((r) => r.confidence > 0)
    .map((r) => ({ type: "TASK_TRIAGED", payload: { taskId: r.taskId, confidence: r.confidence, evidence: r.evidence, skipped: r.skipped } }));
  if (verdicts.length) await append(runId, "triage", verdicts);
  return { skip: skipped.map((r) => ({ id: r.taskId, evidence: r.evidence })) };
}

/**
 * Which of a task's files are present in the workspace: one shell for all of them (one `test -e` per file, in order)
 * instead of a process per file. A run that fails or times out counts every file it did not report as missing.
 */
async function filesPresent(
  sandbox: { exec(cmd: string, args: string[], opts: { timeoutMs: number }): Promise<{ exitCode: number | null; stdout: string; timedOut?: boolean }> },
  paths: string[],
): Promise<TriageEvidence["files"]> {
  if (!paths.length) return [];
  const r = await sandbox.exec("sh", ["-c", 'for f do if test -e "$f"; then echo 1; else echo 0; fi; done', "sh", ...paths.map((p) => p.replace(/\/+$/, ""))], {
    timeoutMs: 10_000,
  });
  const answers = r.timedOut ? [] : r.stdout.split("\n");
  return paths.map((path, i) => ({ path, present: answers[i] === "1" }));
}
