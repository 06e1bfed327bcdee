import { RunEndedError } from "@/lib/runs/steps/context";
import { COMMAND_POLL_INTERVAL } from "@/lib/runs/steps/implement";
import { startStage } from "@/lib/runs/steps/start";
import { revertOutOfScope, validate as validateStep, type ValidateStepResult, type ValidationProgress } from "@/lib/runs/steps/validate";
import type { PlanDocument } from "@/lib/workflow";
import { deadline, type RunFlow } from "./flow";
import type { Plans } from "./plan";
import { gate, honourPauseRequest, pauseForModel, pauseUntilResumed, spendGate } from "./waits";

/*
 * Validate: the work checked against the plan (its constraints, acceptance criteria and tests), and — when it fails —
 * the way on: another attempt with the feedback (fixes auto, minor findings, attempts left), or the fix gate (retry,
 * accept anyway, cancel).
 */

export type Verdict = Extract<ValidateStepResult, { kind: "result" }> & {
  /** A person sent the work back to implementation at the plan gate about its scope (with their notes). */
  scopeRejected?: { notes: string | null; reverted: string[] };
};

/**
 * One validation in steps that each fit the host's duration limit: an acceptance command that outlives its step
 * runs on detached and is looked at in later steps (a durable sleep between them), and a model call cut at the
 * step's end is made again in a fresh step; the checks already run are carried along, never run twice.
 */
async function validateInSteps(
  flow: RunFlow,
  key: string,
  plan: PlanDocument,
  attempt: number,
  until: number,
): Promise<Exclude<ValidateStepResult, { kind: "checks_running" | "step_budget" }>> {
  let progress: ValidationProgress | null = null;
  for (let part = 0; ; part++) {
    const stepKey = part ? `${key}:part:${part}` : key;
    const from: ValidationProgress | null = progress;
    const result: ValidateStepResult = await flow.runStep(stepKey, () => validateStep({ runId: flow.runId, stepKey, plan, attempt, deadline: until, progress: from }));
    if (result.kind !== "checks_running" && result.kind !== "step_budget") return result;
    progress = result.progress;
    if (result.kind === "checks_running") await flow.step.sleep(`${stepKey}:sleep`, COMMAND_POLL_INTERVAL);
  }
}

/** The validation stage of one attempt, until it has a verdict (pausing on a timeout or a model outage). */
export async function validate(flow: RunFlow, plans: Plans, attempt: number): Promise<Verdict> {
  const { runId, runStep, config } = flow;
  await honourPauseRequest(flow, `validate:${attempt}`, "validation");
  // Validation's budget (config.budgets.validation) counts every attempt's validator calls.
  await spendGate(flow, `validate:${attempt}`, "validation");
  const validationStart = await runStep(`validate:${attempt}:start`, () =>
    startStage({ runId, stage: "validation", attempt, stepKey: `validate:${attempt}:start` }),
  );
  flow.stageStart = validationStart.now;
  for (let t = 0; ; t++) {
    const key = `validate:${attempt}${t ? `:retry:${t}` : ""}`;
    const until = deadline(flow, flow.stageStart, "validation");
    const result = await validateInSteps(flow, key, plans.approved, attempt, until);
    if (result.kind === "result") {
      if (result.passed || !result.outOfScopeFiles?.length) return result;
      const decision = await scopeGate(flow, plans, key, attempt, result);
      // The wider scope approved: validated again, those files now in scope (the plan itself, and its hash, unchanged).
      if (decision.decision === "approve") continue;
      // Back to implementation: the changes outside the plan are taken back on the run branch (one commit, an event).
      const files = result.outOfScopeFiles;
      const reverted = await runStep(`${key}:scope:revert`, () => revertOutOfScope({ runId, stepKey: `${key}:scope:revert`, files, attempt }));
      return { ...result, scopeRejected: { notes: decision.notes, reverted: reverted.files } };
    }
    if (result.kind === "timeout") {
      await pauseUntilResumed(flow, key, "timeout", `Validation ran over ${config.timeoutMinutes.validation} minutes.`, "validation");
      continue;
    }
    await pauseForModel(flow, key, result, "validation");
  }
}

/**
 * A diff outside the approved plan's files changes the plan's scope, which only the plan gate may approve (an approved
 * plan is a contract), whatever trustMode says: approve the wider scope (validated again with it), reject to send the
 * work back to implementation (the files reverted), or cancel the run.
 */
function scopeGate(flow: RunFlow, plans: Plans, key: string, attempt: number, result: Extract<ValidateStepResult, { kind: "result" }>) {
  return gate(flow, `${key}:scope`, "plan", {
    scope: { files: result.outOfScopeFiles, attempt },
    plan: plans.approved,
    version: plans.version,
    report: result.report,
  });
}

/**
 * An attempt that failed (its implementation, or its validation): fixed automatically with the feedback (fixes auto,
 * attempts left, no major finding, no budget stop), else the fix gate decides — accept it as it is, retry with the
 * reviewer's notes, or cancel the run.
 */
export async function decideFix(
  flow: RunFlow,
  { attempt, verdict, failure, budgetStopped }: { attempt: number; verdict: Verdict | null; failure: string | null; budgetStopped: boolean },
): Promise<{ accepted: true } | { accepted: false; feedback: string }> {
  const { config } = flow;
  const report = verdict?.report ?? `Implementation failed: ${failure}`;
  const nextFeedback = verdict?.feedback ?? `The previous attempt failed (${failure}). Start again and finish every todo.`;
  // Decided already, at the plan gate about the scope: back to implementation.
  if (verdict?.scopeRejected) {
    const { notes, reverted } = verdict.scopeRejected;
    const takenBack = reverted.length
      ? `\n\nTaken back: ${reverted.join(", ")} — outside the approved plan's files, and a person sent the work back to implementation instead of widening the plan's scope, so these changes were restored to the run's base. Keep to the plan's files; do not change them again.`
      : "";
    return { accepted: false, feedback: `${nextFeedback}${takenBack}${notes ? `\n\nReviewer: ${notes}` : ""}` };
  }
  // Routed by severity: only minor findings are retried automatically; a major one always goes to a person.
  const major = ((verdict?.findings ?? []) as Array<{ severity?: string }>).some((f) => f.severity === "major");
  if (config.trustMode.fixes === "auto" && attempt <= config.limits.maxFixAttempts && !major && !budgetStopped) {
    return { accepted: false, feedback: nextFeedback };
  }
  const decision = await gate(flow, `fix-gate:${attempt}`, "fix", {
    report,
    score: verdict?.score ?? null,
    findings: verdict?.findings ?? [],
    attempt,
    automaticFixesExhausted: config.trustMode.fixes === "auto" && !major,
    majorFindings: major,
  });
  if (decision.decision === "accept") return { accepted: true };
  if (decision.decision === "cancel") throw new RunEndedError("cancelled");
  return { accepted: false, feedback: decision.notes ? `${nextFeedback}\n\nReviewer: ${decision.notes}` : nextFeedback };
}
