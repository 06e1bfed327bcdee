import { redact } from "@/lib/redact";
import { isModelCallError } from "@/lib/ai";
import { applyDebugReplan, reopenTask, runDebugger, type DebugVerdict, type ImplementerState, type VerifyFailure } from "@/lib/agents";
import { outputTail } from "@/lib/agents/debugger";
import { attachSandbox } from "@/lib/sandbox";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { append, loadRun, modelCallKey, stepBudget, workflowClock, type WithNow } from "./context";
import { toAgentPlan } from "./plan";
import { runSandbox } from "./workspace";

/* Per-task verification and the debug step (seed 003): a finished task's own checks, and a failure classified. */

/** How long one task check may run: a quick check, and never past the step's own budget. */
const VERIFY_CHECK_MS = 120_000;

/** How much of a failed check's output is kept (its end: where a log says what failed). */
const VERIFY_OUTPUT_CHARS = 4_000;

export type VerifyStepResult = { verified: string[]; failed: (VerifyFailure & { attempt: number }) | null; now: number };

/**
 * Run the own acceptance commands (`checks`) of tasks just finished, in order, stopping at the first failure: each task
 * that passes is TASK_VERIFIED, the failing one TASK_VERIFY_FAILED with its output's tail (redacted). `attempts` is the
 * failing task's debug attempt so far (recorded with the failure). What the checks leave in the workspace stays: the
 * next checkpoint may hold it, as it would after the implementer ran the same command.
 */
export async function verifyTasks({
  runId,
  stepKey,
  plan: doc,
  taskIds,
  attempts,
  sandboxOf = null,
  workspace = null,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  taskIds: string[];
  /** Debug attempts per task so far (the workflow's count). */
  attempts: Record<string, number>;
  /** A parallel task's checks run in that task's own sandbox. */
  sandboxOf?: string | null;
  /** ...in its lane's sandbox when it has one (beginTask). */
  workspace?: string | null;
}): Promise<VerifyStepResult> {
  const tasks = taskIds.map((id) => doc.tasks.find((t) => t.id === id)).filter((t) => t && (t.checks ?? []).length) as PlanDocument["tasks"];
  if (!tasks.length) return { verified: [], failed: null, now: workflowClock.now() };
  const run = await loadRun({ runId });
  const sandbox = await attachSandbox(runSandbox(run, sandboxOf, workspace));
  const started = Date.now();
  const events: NewRunEvent[] = [];
  const verified: string[] = [];
  let failed: VerifyStepResult["failed"] = null;
  for (const task of tasks) {
    for (const command of task.checks ?? []) {
      const left = Math.max(1_000, started + stepBudget.ms() - Date.now());
      const r = await sandbox.exec("sh", ["-c", command], { timeoutMs: Math.min(VERIFY_CHECK_MS, left) });
      if (r.exitCode === 0 && !r.timedOut) continue;
      const output = outputTail(`${r.stdout}\n${r.stderr}`.trim(), VERIFY_OUTPUT_CHARS);
      failed = { taskId: task.id, command: redact(command), exitCode: r.timedOut ? null : r.exitCode, output, attempt: (attempts[task.id] ?? 0) + 1 };
      break;
    }
    if (failed) {
      events.push({ type: "TASK_VERIFY_FAILED", payload: failed });
      break;
    }
    verified.push(task.id);
    events.push({ type: "TASK_VERIFIED", payload: { taskId: task.id, commands: (task.checks ?? []).map((c) => redact(c)) } });
  }
  if (events.length) await append(runId, stepKey, events);
  return { verified, failed, now: workflowClock.now() };
}

export type DebugStepResult =
  | WithNow<{ kind: "verdict"; verdict: DebugVerdict; exhausted: boolean }>
  | WithNow<{ kind: "model_error"; reason: string; message: string }>;

/**
 * The debug step: the implementer's model classifies a failed verification (lib/agents/debugger.ts) and says whether
 * to fix, ask or escalate; past `maxDebugAttempts` for the task it escalates to a person whatever the verdict
 * (bounded). DEBUG_CLASSIFIED records both. A model outage is returned for the workflow to pause on, as a turn's is.
 */
export async function debugTask({
  runId,
  stepKey,
  plan: doc,
  failure,
  attempt,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  failure: VerifyFailure;
  attempt: number;
}): Promise<DebugStepResult> {
  const run = await loadRun({ runId });
  const task = doc.tasks.find((t) => t.id === failure.taskId) ?? { id: failure.taskId, title: failure.taskId };
  let verdict: DebugVerdict;
  try {
    verdict = await runDebugger({
      failure,
      task: { id: task.id, title: task.title, description: task.description },
      attempt,
      request: run.request,
      modelId: run.config.modelRouting.implementer,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
    });
  } catch (error) {
    if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
    throw error;
  }
  const exhausted = attempt > (run.config.verification?.maxDebugAttempts ?? 2);
  const action = exhausted ? "escalate" : verdict.action;
  await append(runId, stepKey, [
    {
      type: "DEBUG_CLASSIFIED",
      payload: { taskId: failure.taskId, category: verdict.category, action, reason: verdict.reason, attempt, parsed: verdict.parsed, ...(exhausted ? { exhausted } : {}) },
    },
  ]);
  return { kind: "verdict", verdict: { ...verdict, action, question: action === "ask" ? verdict.question : null }, exhausted, now: workflowClock.now() };
}

/** The failed task opened again for a fix pass, with the failure in context (pure: called outside any step). */
export function applyVerifyFailure(
  state: ImplementerState,
  input: { failure: VerifyFailure; verdict: DebugVerdict | null; answer?: string | null; note?: string | null },
): ImplementerState {
  return reopenTask(state, input);
}

/** The plan gate's decision on a re-plan the debug step escalated, told to the implementer (pure). */
export async function applyDebugReplanDecision(
  state: ImplementerState,
  decision: { approved: boolean; plan: PlanDocument | null; notes: string | null },
): Promise<ImplementerState> {
  return applyDebugReplan(state, { approved: decision.approved, plan: decision.plan ? await toAgentPlan(decision.plan) : null, notes: decision.notes });
}
