import { NonRetriableError } from "inngest";
import * as estimates from "@/lib/runs/estimate";
import { applyPlanEdits } from "@/lib/runs/plan-edits";
import { plan as planStep, recordPlan, type PlanRetry, type PlanStepResult } from "@/lib/runs/steps/plan";
import { completeStage, startStage } from "@/lib/runs/steps/start";
import { claimReplan, closeReplan, type ReplanClaim } from "@/lib/runs/steps/replan";
import { readGate } from "@/lib/runs/gates/open";
import { decisionKey } from "@/lib/runs/gates/acks";
import { gateDecided } from "../events";
import { applySentBack } from "@/lib/runs/steps/implement";
import { dropTask } from "@/lib/runs/steps/tasks";
import type { ImplementerState } from "@/lib/agents";
import type { PlanDocument } from "@/lib/workflow";
import { deadline, type RunFlow } from "./flow";
import { announceWaitClosed, clarify, gate, pauseForModel, pauseUntilResumed, spendGate, untilWaitCloses, waitFor } from "./waits";

/*
 * Plan → plan gate: the planner drafts (asking questions, retrying an invalid diagram, pausing on an outage or a
 * timeout), the plan is recorded, and a person approves, edits, rejects (plan again) or asks back — unless
 * trustMode.planning is auto. A re-plan later in the run (the implementer's or the debug step's) goes through the same
 * gate whatever trustMode says: an approved plan is a contract.
 */

/** The planning so far, which a re-plan later in the run goes on from. */
export type Plans = {
  /** Every rejection's feedback, in order. */
  feedback: string[];
  /** Questions answered for the planner (and a person's questions it answered). */
  answers: Array<{ question: string; answer: string }>;
  diagramAttempt: number;
  /** The latest plan version recorded. */
  version: number;
  /** The plan the run carries out (a re-plan replaces it). */
  approved: PlanDocument;
};

/**
 * A planner step, made again in a fresh step (`<key>:part:<n>`) while its model call outlives the step's budget;
 * a cut diagram retry is made again as the retry.
 */
async function planInSteps(
  flow: RunFlow,
  key: string,
  plan: (stepKey: string, retry: PlanRetry | null) => Promise<PlanStepResult>,
): Promise<Exclude<PlanStepResult, { kind: "step_budget" }>> {
  let retry: PlanRetry | null = null;
  for (let part = 0; ; part++) {
    const stepKey = part ? `${key}:part:${part}` : key;
    const from: PlanRetry | null = retry;
    const result: PlanStepResult = await flow.runStep(stepKey, () => plan(stepKey, from));
    if (result.kind !== "step_budget") return result;
    retry = result.retry;
  }
}

/** The planning stage: drafted and decided (round after round) until a plan is approved. */
export async function planUntilApproved(flow: RunFlow): Promise<Plans> {
  const { runId, runStep, config } = flow;
  flow.stageStart = (await runStep("planning:start", () => startStage({ runId, stage: "planning", stepKey: "planning:start" }))).now;
  const feedback: string[] = [];
  const answers: Array<{ question: string; answer: string }> = [];
  let diagramAttempt = 0;
  let version = 0;
  let plan: PlanDocument;
  // "Ask back": a person's question on the last plan gate, answered by the next planner call (not a rejection).
  let question: { gateId: string; question: string; plan: PlanDocument } | null = null;
  for (let round = 0; ; round++) {
    let drafted: Extract<PlanStepResult, { kind: "plan" }> | null = null;
    // An invalid diagram a person fixed by hand from the pause (POST /resume with editedPlan).
    let handFixed: { plan: PlanDocument; by: string } | null = null;
    let answered: { question: string; answer: string } | null = null;
    for (let t = 0; ; t++) {
      const key = `plan:${round}:${t}`;
      if (round > 0 || t > 0) {
        // Another planner call (a re-plan, a question answered, a diagram retried): within the planning budget.
        await spendGate(flow, key, "planning");
      }
      const planningDeadline = deadline(flow, flow.stageStart, "planning");
      const planQuestion = question ? { question: question.question, plan: question.plan } : undefined;
      const result = await planInSteps(flow, key, (stepKey, retry) =>
        planStep({ runId, stepKey, feedback, clarifications: answers, diagramAttempt, deadline: planningDeadline, planQuestion, retry }),
      );
      if (result.kind === "timeout") {
        // The planner's model call was cut at the deadline: a person extends (plan again) or cancels.
        await pauseUntilResumed(flow, `${key}:timeout`, "timeout", `Planning ran over ${config.timeoutMinutes.planning} minutes.`, "planning");
        continue;
      }
      if (result.kind !== "model_error") diagramAttempt += result.diagramsProduced;
      if (result.kind === "model_error") {
        await pauseForModel(flow, key, result, "planning");
        continue;
      }
      if (result.kind === "invalid") {
        const resumed = await pauseUntilResumed(
          flow,
          key,
          "invalid_plan",
          `The planner's diagram is not valid Mermaid: ${result.message}`,
          "planning",
          result.draft,
        );
        if (!resumed.editedPlan) continue;
        handFixed = { plan: resumed.editedPlan, by: resumed.by ?? "unknown" };
        break;
      }
      if (result.kind === "clarification") {
        const answer = await clarify(flow, `${key}:q`, "planning", result);
        answers.push({ question: result.question, answer });
        continue;
      }
      if (result.now > deadline(flow, flow.stageStart, "planning")) {
        await pauseUntilResumed(flow, `${key}:timeout`, "timeout", `Planning ran over ${config.timeoutMinutes.planning} minutes.`, "planning");
      }
      drafted = result;
      break;
    }
    version += 1;
    const recordKey = `plan:${round}:record`;
    if (handFixed) {
      // Checked against Mermaid's grammar when it was submitted; recorded as a person's edit (PLAN_EDITED).
      plan = handFixed.plan;
      const fixed = handFixed;
      const fixedVersion = version;
      await runStep(recordKey, () => recordPlan({ runId, stepKey: recordKey, plan: fixed.plan, version: fixedVersion, edited: true, by: fixed.by }));
    } else {
      const draft = drafted!;
      plan = draft.plan;
      const asked = question;
      const reply = asked ? { gateId: asked.gateId, question: asked.question, answer: draft.answer ?? "(The planner gave no answer.)" } : undefined;
      const draftVersion = version;
      await runStep(recordKey, () =>
        recordPlan({ runId, stepKey: recordKey, plan: draft.plan, version: draftVersion, feedback: asked ? null : (feedback.at(-1) ?? null), answered: reply }),
      );
      if (reply) {
        // Later plans (after a rejection, say) keep what was asked and answered.
        answered = { question: reply.question, answer: reply.answer };
        answers.push(answered);
      }
    }
    question = null;
    if (config.trustMode.planning === "auto") {
      // No gate to show it on: the estimate is kept on the run (PLAN_ESTIMATED), to set the run beside it after.
      const estimateKey = `plan:${round}:estimate`;
      const estimatePlan = plan;
      const estimateVersion = version;
      await runStep(estimateKey, () => estimates.recordAutoEstimate({ runId, stepKey: estimateKey, plan: estimatePlan, version: estimateVersion }));
      break;
    }

    // ---- The plan gate
    // The estimate for this plan (tokens, cost, time per stage), made once and kept with the gate it is shown on.
    const estimatePlan = plan;
    const estimateVersion = version;
    const estimate = await runStep(`plan-gate:${round}:estimate`, () => estimates.makeEstimate({ runId, plan: estimatePlan, version: estimateVersion }));
    const decision = await gate(flow, `plan-gate:${round}`, "plan", { plan, version, estimate, ...(answered ? { answered } : {}) });
    if (decision.decision === "approve") {
      if (decision.editedPlan) {
        version += 1;
        // Tasks (with their files: the scope), acceptance commands and summary as edited; what was left out stays.
        plan = applyPlanEdits({ drafted: plan, edited: decision.editedPlan });
        const editedKey = `plan:${round}:edited`;
        const edited = plan;
        const editedVersion = version;
        await runStep(editedKey, () =>
          recordPlan({ runId, stepKey: editedKey, plan: edited, version: editedVersion, edited: true, by: decision.decidedBy ?? "unknown" }),
        );
      }
      break;
    }
    if (decision.decision === "ask") {
      // Not a rejection: it does not count toward limits.maxReplans.
      question = { gateId: decision.gateId, question: decision.notes ?? "", plan };
      continue;
    }
    feedback.push(decision.notes ?? "The plan was rejected without feedback.");
    if (feedback.length > config.limits.maxReplans) {
      throw new NonRetriableError(
        `The plan was rejected ${feedback.length} times (limit ${config.limits.maxReplans}). Last feedback: ${feedback.at(-1)}`,
      );
    }
  }
  await runStep("planning:done", () => completeStage({ runId, stage: "planning", stepKey: "planning:done" }));
  return { feedback, answers, diagramAttempt, version, approved: plan! };
}

/** What came of a re-plan proposed during implementation (see `replan`). */
export type Replanned = {
  approved: boolean;
  /** The new plan, when this proposal's own re-plan was approved: the caller makes it the run's (`plans.approved`). */
  plan: PlanDocument | null;
  notes: string | null;
  /**
   * The run's plan changed — by this re-plan, by the one it joined, or by one approved since the proposing task began:
   * a parallel task's session ends there (unmerged) and the rounds run it afresh under the run's plan.
   */
  planChanged: boolean;
  /** No re-plan: limits.maxReplans was reached (a debug step's proposal then goes to the fix gate). */
  limited: boolean;
  /** When the wait for the plan gate ended (the stage clock starts again from it), or null if there was no wait. */
  now: number | null;
};

/**
 * A re-plan the implementer, the debug step or a person (a question sent back to planning) proposed: drafted by the
 * planner with the observation, decided at the plan gate. One at a time per run: a parallel task's proposal made while
 * another task's re-plan is drafted waits for its gate, then joins it (its reason shown there, the gate's decision is
 * its own); one made after the run's plan changed under its task is dropped (the task runs afresh). Which of these
 * happens is decided by a step (claimReplan), never by which task got there first in this process.
 * `counted`: toward limits.maxReplans (once per plan gate). `attempt`: the implementation attempt that goes on after.
 */
export async function replan(
  flow: RunFlow,
  plans: Plans,
  key: string,
  note: string,
  { counted, attempt }: { counted: boolean; attempt?: number },
): Promise<Replanned> {
  const { runId, runStep, config } = flow;
  const { feedback, answers, diagramAttempt } = plans;
  const taskId = flow.task?.id ?? null;
  let claim: ReplanClaim;
  for (let i = 0; ; i++) {
    // The first look keeps the key the planning stage's start had (a run from before the claim reads it as leading).
    const k = i ? `${key}:start:busy:${i}` : `${key}:start`;
    const claimed = (await runStep(k, () => claimReplan({ runId, stepKey: k, taskId, reason: note, counted, maxReplans: config.limits.maxReplans }))) as
      | ReplanClaim
      | { kind?: undefined; now: number };
    claim = claimed.kind ? claimed : { kind: "lead", version: plans.version, now: claimed.now };
    if (claim.kind !== "busy") break;
    // Another task's re-plan or wait for a person is under way: look again once it ends (the key a durable sleep had).
    await untilWaitCloses(flow, `${k}:wait`, i);
  }
  if (claim.kind === "limit") {
    return { approved: false, plan: null, notes: `No more re-plans in this run (limits.maxReplans is ${config.limits.maxReplans}).`, planChanged: false, limited: true, now: null };
  }
  if (claim.kind === "outdated") {
    const notes = "The run's plan changed since this task began: the task starts afresh under the new plan.";
    return { approved: false, plan: null, notes, planChanged: true, limited: false, now: null };
  }
  if (claim.kind === "joined") {
    // Another task's re-plan gate: its decision is this proposal's too (the other task's wait sends the reminders).
    const gateId = claim.gateId;
    // Acknowledged under this task's own key: the announcement is repeated until every task waiting for it took it.
    const ackKey = decisionKey.joined(gateId, taskId!);
    const decided = await waitFor(flow, `${key}:joined`, () => readGate({ runId, gateId, ackKey }), gateDecided.name);
    const approved = decided.decision === "approve";
    return { approved, plan: null, notes: decided.notes ?? null, planChanged: approved, limited: false, now: decided.now };
  }
  const close = async (): Promise<number> => {
    const closed = await runStep(`${key}:done`, () => closeReplan({ runId, stepKey: `${key}:done`, attempt }));
    // The re-plan held the run's other tasks' waits and re-plans: they look again now.
    await announceWaitClosed(flow, `${key}:done`);
    return closed.now;
  };
  await spendGate(flow, `${key}:plan`, "planning");
  const drafted = await runStep(`${key}:plan`, () =>
    planStep({ runId, stepKey: `${key}:plan`, feedback: [...feedback, note], clarifications: answers, diagramAttempt }),
  );
  if (drafted.kind !== "plan") {
    const now = await close();
    const why = drafted.kind === "clarification" ? "the planner asked a question instead" : "message" in drafted ? drafted.message : drafted.kind;
    return { approved: false, plan: null, notes: `The re-plan could not be drafted (${why}).`, planChanged: false, limited: false, now };
  }
  // The version from the claim's memoized result (the latest recorded when the re-plan began).
  const draftedVersion = claim.version + 1;
  plans.version = Math.max(plans.version, draftedVersion);
  await runStep(`${key}:record`, () => recordPlan({ runId, stepKey: `${key}:record`, plan: drafted.plan, version: draftedVersion, feedback: note }));
  const estimate = await runStep(`${key}:estimate`, () => estimates.makeEstimate({ runId, plan: drafted.plan, version: draftedVersion }));
  const decision = await gate(flow, `${key}:gate`, "plan", { plan: drafted.plan, version: draftedVersion, replan: note, estimate });
  const now = await close();
  if (decision.decision !== "approve") return { approved: false, plan: null, notes: decision.notes ?? null, planChanged: false, limited: false, now };
  let chosen = drafted.plan;
  if (decision.editedPlan) {
    const editedVersion = draftedVersion + 1;
    plans.version = Math.max(plans.version, editedVersion);
    chosen = applyPlanEdits({ drafted: drafted.plan, edited: decision.editedPlan });
    const edited = chosen;
    await runStep(`${key}:edited`, () =>
      recordPlan({ runId, stepKey: `${key}:edited`, plan: edited, version: editedVersion, edited: true, by: decision.decidedBy ?? "unknown" }),
    );
  }
  return { approved: true, plan: chosen, notes: decision.notes ?? null, planChanged: true, limited: false, now };
}

/**
 * A person sent a question of the implementation back to planning (skip with `then: "planning"`): the planner re-plans
 * with the question, and the new plan passes the plan gate whatever trustMode says; the gate's decision is the
 * question's answer. A person's choice: it does not count toward limits.maxReplans. In a parallel task, a change of
 * the run's plan (this re-plan approved, or the one it joined) ends the task's session (`replanned`): unmerged, its
 * worktree and branch dropped, it starts afresh in the rounds that follow the new plan.
 */
export async function sendBackToPlanning(
  flow: RunFlow,
  plans: Plans,
  key: string,
  attempt: number,
  state: ImplementerState,
  question: string,
): Promise<{ state: ImplementerState; replanned: boolean }> {
  const from = flow.task ? ` (in task ${flow.task.id})` : "";
  const replanned = await replan(flow, plans, `${key}:planning`, `A person sent the run back to planning with the implementer's question${from}: ${question}`, {
    counted: false,
    attempt,
  });
  if (replanned.plan) plans.approved = replanned.plan;
  // The wait at the gate is not implementation time.
  if (replanned.now !== null) flow.stageStart = replanned.now;
  if (flow.task && replanned.planChanged) {
    const taskId = flow.task.id;
    await flow.runStep(`${key}:planning:drop`, () => dropTask({ runId: flow.runId, taskId }));
    return { state, replanned: true };
  }
  return { state: await applySentBack(state, replanned), replanned: false };
}
