import { and, eq, inArray } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { approvedPlanHash, planHash } from "@/lib/workflow/plan-hash";
import { listEvents } from "@/lib/db/event-store";
import { redact, redactDeep } from "@/lib/redact";
import { isModelCallError } from "@/lib/ai";
import { runValidateStep, StepBudgetExceededError, type ValidationProgress } from "@/lib/agents";
import { attachSandbox } from "@/lib/sandbox";
import { restoreFilesToBase } from "@/lib/git";
import type { PlanDocument } from "@/lib/workflow";
import { append, baseShaOf, loadRun, modelCallKey, RunEndedError, stepBudget, workflowClock } from "./context";
import { endedStatus, stageSignal } from "./end";
import { toAgentPlan } from "./plan";
import { stageInstructions } from "./instructions";
import { runSandbox } from "./workspace";

/* Validation: the work checked against the plan in the sandbox, in steps that each fit the host's duration limit. */

export type { ValidationProgress };

export type ValidateStepResult =
  | {
      kind: "result";
      passed: boolean;
      score: number;
      feedback: string;
      report: string;
      findings: unknown[];
      /** Changed files outside the approved plan's scope: a change of scope, decided at the plan gate (inngest/run/validate). */
      outOfScopeFiles?: string[];
      now: number;
    }
  | { kind: "model_error"; reason: string; message: string; now: number }
  | { kind: "timeout"; now: number }
  /** An acceptance command outlived the step: it runs on detached; after a durable sleep the next step continues. */
  | { kind: "checks_running"; progress: ValidationProgress; now: number }
  /** A validator model call had not answered when the step's time ran out: made again in a fresh step (checks kept). */
  | { kind: "step_budget"; progress: ValidationProgress; now: number };

/**
 * What people approved changing beyond the plan's files: the actions' paths at the run's policy gates, and the wider
 * scope approved at a plan gate about scope (`context.scope.files`). Validation counts it as in scope.
 */
async function approvedPolicyPaths(runId: string): Promise<string[]> {
  const db = await getDb();
  const rows = await db
    .select({ context: gates.context })
    .from(gates)
    .where(and(eq(gates.workflowRunId, runId), inArray(gates.kind, ["policy", "plan"]), eq(gates.status, "approved")));
  return rows.flatMap((r) => {
    const context = r.context as { action?: { paths?: unknown }; scope?: { files?: unknown } } | null;
    const paths = context?.action?.paths ?? context?.scope?.files;
    return Array.isArray(paths) ? paths.filter((p): p is string => typeof p === "string") : [];
  });
}

/** Task ids in the order the latest implementation attempt finished them. */
async function completedTaskOrder(runId: string): Promise<string[]> {
  const events = await listEvents({ runId, limit: 100_000 });
  const start = events.findLastIndex((e) => e.type === "STAGE_STARTED" && (e.payload as { stage?: string }).stage === "implementation");
  // Tasks triage skipped were done before any other.
  const triaged = events.filter((e) => e.type === "TASK_TRIAGED" && (e.payload as { skipped?: boolean }).skipped).map((e) => (e.payload as { taskId: string }).taskId);
  return [
    ...triaged,
    ...events
      .slice(start + 1)
      .filter((e) => e.type === "TASK_COMPLETED")
      .map((e) => (e.payload as { taskId: string }).taskId),
  ];
}

/** The approved plan's hash and the hash of the plan being validated (they differ only if the plan changed unapproved). */
async function frozenPlanCheck({ runId, plan }: { runId: string; plan: PlanDocument }): Promise<{ approved: string; validated: string } | undefined> {
  const approved = approvedPlanHash(await listEvents({ runId, limit: 100_000 }));
  return approved ? { approved, validated: planHash(plan) } : undefined;
}

export async function validate({
  runId,
  stepKey,
  plan: doc,
  attempt,
  deadline,
  progress,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  attempt: number;
  /** The validation stage's deadline (epoch ms): commands get at most the time left; past it the step reports a timeout. */
  deadline?: number;
  /** Where the previous step of this validation stopped (its `checks_running` or `step_budget` result). */
  progress?: ValidationProgress | null;
}): Promise<ValidateStepResult> {
  const left = deadline === undefined ? undefined : deadline - workflowClock.now();
  const run = await loadRun({ runId });
  const base = await baseShaOf(runId);
  const sandbox = await attachSandbox(runSandbox(run, null, null, base ?? undefined));
  if (left !== undefined && left <= 0) {
    // Past the deadline, a check still running detached is killed, as an inline one would be.
    if (progress?.pending) await sandbox.killDetached?.(progress.pending.id).catch(() => null);
    return { kind: "timeout", now: workflowClock.now() };
  }
  const stage = stageSignal(runId, deadline);
  // Real time, not workflowClock: the host cuts the step by the wall clock.
  const stepEndsAt = Date.now() + stepBudget.ms();
  let result;
  try {
    const step = await runValidateStep({
      plan: await toAgentPlan(doc),
      request: run.request,
      sandbox,
      attempt,
      threshold: run.config.validation.scoreThreshold,
      commandTimeoutMs: left === undefined ? undefined : Math.max(1_000, Math.min(left, 10 * 60_000)),
      modelId: run.config.modelRouting.validator,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
      completedOrder: await completedTaskOrder(runId),
      approvedPaths: await approvedPolicyPaths(runId),
      frozen: await frozenPlanCheck({ runId, plan: doc }),
      signal: stage.signal,
      stepEndsAt,
      progress: progress ?? undefined,
      instructions: await stageInstructions({ run, stage: "validation", touched: [...new Set(doc.tasks.flatMap((t) => t.files ?? []))] }),
    });
    if (step.kind === "checks_running") return { kind: "checks_running", progress: step.progress, now: workflowClock.now() };
    result = step.result;
  } catch (error) {
    if (stage.cancelled()) throw new RunEndedError((await endedStatus(runId)) ?? "cancelled");
    if (stage.overtime()) return { kind: "timeout", now: Math.max(workflowClock.now(), deadline ?? 0) + 1 };
    if (error instanceof StepBudgetExceededError) return { kind: "step_budget", progress: error.resume as ValidationProgress, now: workflowClock.now() };
    if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
    throw error;
  } finally {
    stage.stop();
  }
  if (deadline !== undefined && workflowClock.now() > deadline) return { kind: "timeout", now: workflowClock.now() };
  const report = redact(result.report);
  await append(runId, stepKey, [
    result.passed
      ? { type: "VALIDATION_PASSED", payload: { attempt, score: result.alignmentScore, report } }
      : { type: "VALIDATION_FAILED", payload: { attempt, score: result.alignmentScore, summary: redact(result.feedback).slice(0, 2000), report } },
  ]);
  return {
    kind: "result",
    passed: result.passed,
    score: result.alignmentScore,
    feedback: redact(result.feedback),
    report,
    findings: redactDeep(result.findings),
    outOfScopeFiles: result.outOfScopeFiles,
    now: workflowClock.now(),
  };
}

/**
 * Sent back to implementation at the plan gate about scope: the changes outside the plan are not kept. Those files are
 * restored on the run branch to the run's base (new ones deleted, changed ones restored) in one commit, recorded as
 * SCOPE_REVERTED; the next attempt starts without them (and is told so).
 */
export async function revertOutOfScope({ runId, stepKey, files, attempt }: { runId: string; stepKey: string; files: string[]; attempt: number }): Promise<{ files: string[]; commitSha: string }> {
  const run = await loadRun({ runId });
  const base = await baseShaOf(runId);
  if (!base) throw new RunEndedError("failed");
  const sandbox = await attachSandbox(runSandbox(run, null, null, base));
  const commit = await restoreFilesToBase({
    sandbox,
    runId,
    base,
    files,
    reason: `Sent back to implementation at the plan gate: changes outside the approved plan's files are not kept (attempt ${attempt}).`,
  });
  const reverted = files.map((f) => redact(f));
  await append(runId, stepKey, [{ type: "SCOPE_REVERTED", payload: { files: reverted, commitSha: commit.sha, attempt } }]);
  return { files: reverted, commitSha: commit.sha };
}
