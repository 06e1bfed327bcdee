/**
 * Triage (seeds 001/003): before implementing, is a task already done in the repository? The evidence is the task's
 * own checks (tasks.md `Check:` lines) and whether the files it names are present. Only checks can prove a task:
 *
 * - a check fails → 0 (not done);
 * - every check passes → 0.9 with all its files present (or none named), 0.5 with one missing;
 * - no checks, every named file present → 0.3 (it may be done; nothing proves it); otherwise 0.
 *
 * At or above the run's `triage.threshold` the task is skipped as already done; below it, it is implemented anyway.
 */

export type TriageEvidence = {
  checks: Array<{ command: string; exitCode: number | null; output: string }>;
  files: Array<{ path: string; present: boolean }>;
};

export type TriageResult = { taskId: string; confidence: number; evidence: string[]; skipped: boolean };

export function triageTask({ taskId, evidence, threshold }: { taskId: string; evidence: TriageEvidence; threshold: number }): TriageResult {
  const lines: string[] = [];
  for (const c of evidence.checks) {
    const tail = c.output.trim().split("\n").slice(-3).join(" ").slice(0, 200);
    lines.push(c.exitCode === 0 ? `\`${c.command}\` passes` : `\`${c.command}\` fails (exit ${c.exitCode ?? "timeout"})${tail ? `: ${tail}` : ""}`);
  }
  for (const f of evidence.files) lines.push(`${f.path} ${f.present ? "is present" : "is missing"}`);
  const allFiles = evidence.files.every((f) => f.present);
  let confidence: number;
  if (evidence.checks.length) {
    confidence = evidence.checks.some((c) => c.exitCode !== 0) ? 0 : allFiles ? 0.9 : 0.5;
  } else {
    confidence = evidence.files.length && allFiles ? 0.3 : 0;
    lines.push("no check of its own proves it");
  }
  return { taskId, confidence, evidence: lines, skipped: confidence > 0 && confidence >= threshold };
}
