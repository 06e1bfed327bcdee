import { NonRetriableError } from "inngest";
import * as budgets from "@/lib/runs/budget";
import { RunEndedError } from "@/lib/runs/steps/context";
import { publishDraft } from "@/lib/runs/steps/github";
import {
  applyAnswer,
  applyPolicy,
  applyReplan,
  beginImplementation,
  callMcpTool,
  COMMAND_POLL_INTERVAL,
  diffSummary,
  implementTurn,
  pollCommand,
  type TurnStepResult,
} from "@/lib/runs/steps/implement";
import { startStage } from "@/lib/runs/steps/start";
import { dropTask } from "@/lib/runs/steps/tasks";
import { triage as triageStep } from "@/lib/runs/steps/triage";
import { applyDebugReplanDecision, applyVerifyFailure, debugTask, verifyTasks, type DebugStepResult, type VerifyStepResult } from "@/lib/runs/steps/verify";
import { runsInParallel, type PlanDocument } from "@/lib/workflow";
import type { ImplementerState } from "@/lib/agents";
import { deadline, type RunFlow } from "./flow";
import { replan, sendBackToPlanning, type Plans } from "./plan";
import { implementInParallel } from "./tasks";
import { budgetGate, clarifyOrSendBack, gate, githubStep, pauseForModel, pauseUntilResumed } from "./waits";

/*
 * Implement: the implementer's turns, one step each, until it is done or fails — with what a turn may lead to: a
 * command collected in later steps, per-task verification and its debug step, a budget gate, a question, a policy gate
 * for a risky action, a re-plan through the plan gate, a pause. Then the implementation gate (trustMode manual).
 */

/** Triage: tasks already done in the repository (their own checks pass) are skipped, once for the run. */
export async function triage(flow: RunFlow, plans: Plans, branch: string): Promise<{ skip: Array<{ id: string; evidence: string[] }> }> {
  if (flow.config.triage?.enabled === false) return { skip: [] };
  // The run as loaded at the start, on the branch the `branch` step made (both memoized): not read again here.
  const run = { ...flow.run, branch };
  return flow.runStep("triage", () => triageStep({ runId: flow.runId, plan: plans.approved, run }));
}

/**
 * A command left running detached by a turn: looked at in steps (each waits at most the step budget), with a
 * durable sleep between them, until it has ended and its result is in the conversation.
 */
async function awaitCommand(flow: RunFlow, key: string, current: ImplementerState, plan: PlanDocument, until: number) {
  const taskId = flow.task?.id ?? null;
  const workspace = flow.task?.workspace ?? null;
  for (let i = 0; ; i++) {
    const polled = await flow.runStep(`${key}:${i}`, () => pollCommand({ runId: flow.runId, stepKey: `${key}:${i}`, state: current, plan, deadline: until, taskId, workspace }));
    if (polled.kind !== "running") return polled;
    await flow.step.sleep(`${key}:${i}:sleep`, COMMAND_POLL_INTERVAL);
  }
}

/**
 * A task failed its own acceptance command (per-task verification): the debug step classifies it, and the run
 * fixes it (another implementer pass on the task, with the failure in context), asks a person, or escalates (a
 * re-plan through the plan gate for a plan problem, else the fix gate). Returns the implementer's next state — or, in
 * a parallel task whose re-plan was approved, that the task's session ends there (`replanned`).
 */
async function debugFailure(
  flow: RunFlow,
  plans: Plans,
  key: string,
  implAttempt: number,
  current: ImplementerState,
  failure: VerifyStepResult["failed"] & object,
): Promise<{ state: ImplementerState; replanned: boolean }> {
  const { runId, runStep, config, debugAttempts } = flow;
  const { attempt: debugAttempt, ...failed } = failure;
  debugAttempts[failure.taskId] = debugAttempt;
  let debugged: DebugStepResult;
  for (let t = 0; ; t++) {
    const k = `${key}:debug${t ? `:retry:${t}` : ""}`;
    const approvedPlan = plans.approved;
    debugged = await runStep(k, () => debugTask({ runId, stepKey: k, plan: approvedPlan, failure: failed, attempt: debugAttempt }));
    if (debugged.kind === "verdict") break;
    await pauseForModel(flow, k, debugged, "implementation");
  }
  const { verdict, exhausted } = debugged;
  if (verdict.action === "fix") return { state: applyVerifyFailure(current, { failure: failed, verdict }), replanned: false };
  const from = flow.task ? ` (in task ${flow.task.id})` : "";
  // A person may send the debug step's question back to planning: then it is re-planned as a plan failure is.
  let sentBack: string | null = null;
  if (verdict.action === "ask" && verdict.question) {
    const question = {
      question: verdict.question,
      context: `Task ${failure.taskId}'s check \`${failure.command}\` failed (${verdict.category}): ${verdict.reason}`,
      options: [],
      responseType: "text" as const,
    };
    const closed = await clarifyOrSendBack(flow, `${key}:q`, "implementation", question);
    if (!closed.sentBack) return { state: applyVerifyFailure(current, { failure: failed, verdict, answer: closed.answer }), replanned: false };
    sentBack = `A person sent the run back to planning with the debug step's question${from}: ${verdict.question}`;
  }
  // In a parallel task too: `plans` is the run's, shared by its tasks (one approved plan); the re-plans are counted,
  // and joined when two tasks propose at once, by the run's own record (claimReplan).
  if (sentBack || (verdict.category === "plan" && verdict.parsed && !exhausted)) {
    // The plan itself is wrong: a re-plan, decided at the plan gate (an approved plan is a contract).
    const replanned = await replan(
      flow,
      plans,
      `${key}:replan`,
      sentBack ??
        `Re-plan proposed by the debug step${from}. Observation: task ${failure.taskId}'s acceptance command \`${failure.command}\` failed and the failure is the plan's: ${verdict.reason}`,
      { counted: !sentBack, attempt: implAttempt },
    );
    // Past limits.maxReplans: the fix gate decides instead (below).
    if (!replanned.limited) {
      if (replanned.plan) plans.approved = replanned.plan;
      if (replanned.now !== null) flow.stageStart = replanned.now;
      if (flow.task && replanned.planChanged) {
        // The run's plan changed under a parallel task: its session ends here, as at an implementer's re-plan (see converse).
        const taskId = flow.task.id;
        const workspace = flow.task.workspace ?? null;
        await runStep(`${key}:replan:drop`, () => dropTask({ runId, taskId, workspace }));
        return { state: current, replanned: true };
      }
      return { state: await applyDebugReplanDecision(current, replanned), replanned: false };
    }
  }
  const decision = await gate(flow, `${key}:fix-gate`, "fix", {
    report: `Task ${failure.taskId} failed its check \`${failure.command}\` (exit ${failure.exitCode ?? "timed out"}). Debug step: ${verdict.category} — ${verdict.reason}${exhausted ? ` (after ${debugAttempt - 1} fix passes)` : ""}\n\n${failure.output}`,
    score: null,
    findings: [],
    attempt: debugAttempt,
    automaticFixesExhausted: exhausted,
    majorFindings: false,
    verification: { taskId: failure.taskId, command: failure.command, category: verdict.category },
  });
  if (decision.decision === "cancel") throw new RunEndedError("cancelled");
  // Accepted: the task stays done as it is; validation still judges the whole.
  if (decision.decision === "accept") return { state: current, replanned: false };
  debugAttempts[failure.taskId] = 0;
  return { state: applyVerifyFailure(current, { failure: failed, verdict, note: decision.notes ?? null }), replanned: false };
}

/**
 * Whether a parallel task's turn step makes the session's next turn too, keyed as that turn (`<task key>:turn:<n+1>`):
 * when the turn finished the task — its one todo done and checkpointed, nothing left running — and nothing the session
 * does between two turns is due (no verify step: no finished task with an acceptance command; no budget check or stop;
 * the stage's time not over), the next turn is the model's closing word (its summary), which would otherwise follow at
 * once in a step of its own. Each of a parallel task's steps is a race-mode step — two calls of the run, each replaying
 * it — on its lane's way to its next task and, for the round's last tasks, to the round's last merge: a single session
 * (limit 1) has no such turn per task and pays nothing for it. Decided from memoized inputs, so a replay takes the
 * closing turn from the step's result. A re-run of the step (after a crash) makes both turns again, each keyed as
 * before: the task's checkpoint is found, not committed twice, and the events and model calls are recorded once. A turn
 * step memoized before this (no closing turn in it) leaves the next turn to a step of its own.
 */
function closes(
  flow: RunFlow,
  plan: PlanDocument,
  result: TurnStepResult,
  { before, unverified, deadline: until, budgetStop }: { before: Map<string, string>; unverified: string[]; deadline: number; budgetStop: unknown },
): result is Extract<TurnStepResult, { kind: "continue" }> {
  if (result.kind !== "continue" || result.state.pendingCommand || result.now > until) return false;
  if (flow.config.budgets?.implementation || budgetStop) return false;
  const todos = result.state.todos;
  if (!todos.length || todos.some((t) => t.status !== "done")) return false;
  const finished = todos.filter((t) => before.get(t.id) !== "done").map((t) => t.id);
  if (!finished.length) return false;
  const checked = (id: string) => (plan.tasks.find((t) => t.id === id)?.checks ?? []).length > 0;
  return flow.config.verification?.enabled === false || ![...unverified, ...finished].some(checked);
}

export type Implemented = {
  state: ImplementerState;
  /** Why the attempt failed (the implementer gave up, or its turns ran out), or null. */
  failure: string | null;
  /** "Finish the task in progress, then stop" (a budget gate's decision) ended the attempt. */
  budgetStopped: boolean;
  /** A parallel task's session ended at an approved re-plan (the plan changed under it: not merged, scheduled anew). */
  replanned?: boolean;
};

/**
 * One implementation attempt: turn after turn until the implementer is done or fails; then its draft pull request.
 * A first attempt whose plan has tasks that can run side by side (limits.maxConcurrentTasks above 1) runs them in
 * parallel sessions (./tasks.ts); otherwise — and for every fix attempt — one session does every task in order.
 */
export async function implement(
  flow: RunFlow,
  plans: Plans,
  { attempt, feedback, skip }: { attempt: number; feedback: string | null; skip: Array<{ id: string; evidence: string[] }> },
): Promise<Implemented> {
  const { runId, runStep, run, config } = flow;
  const implStart = await runStep(`impl:${attempt}:start`, () =>
    startStage({ runId, stage: "implementation", attempt, stepKey: `impl:${attempt}:start` }),
  );
  flow.stageStart = implStart.now;
  const approvedAtStart = plans.approved;
  let implemented: Implemented;
  if (attempt === 1 && runsInParallel(approvedAtStart, skip, config.limits.maxConcurrentTasks ?? 1)) {
    implemented = await implementInParallel(flow, plans, { attempt, feedback, skip, converse });
  } else {
    const state = (await runStep(`impl:${attempt}:begin`, () =>
      beginImplementation({
        runId,
        plan: approvedAtStart,
        request: run.request,
        feedback,
        maxIterations: config.limits.maxIterations,
        skip,
      }),
    )) as ImplementerState;
    implemented = await converse(flow, plans, { key: `impl:${attempt}`, attempt, state });
  }
  // GitHub: the work so far goes up as a draft pull request, marked ready once validation passes.
  if (!implemented.failure && run.github && config.git.createPR) {
    await githubStep(flow, `github:draft:${attempt}`, "implementation", (key) => publishDraft({ runId, stepKey: key }));
  }
  return implemented;
}

/**
 * One implementer session, turn after turn until it is done or fails: the run's single session (key `impl:<attempt>`),
 * or a parallel task's own (flow.task set; its turns run in the task's sandbox).
 */
export async function converse(
  flow: RunFlow,
  plans: Plans,
  {
    key: prefix,
    attempt,
    state: initial,
    first = null,
  }: {
    key: string;
    attempt: number;
    state: ImplementerState;
    /**
     * The session's first turn, made already (`<key>:turn:0`) by the step that began a parallel task (./tasks.ts): taken
     * as that turn's result instead of a step of its own.
     */
    first?: TurnStepResult | null;
  },
): Promise<Implemented> {
  const { runId, runStep, config, debugAttempts, budgetRaised } = flow;
  const taskId = flow.task?.id ?? null;
  /** A parallel task's sandbox, when it is its lane's (./tasks.ts). */
  const workspace = flow.task?.workspace ?? null;
  /** "Finish the task in progress, then stop" (a budget gate's decision) for this attempt, and whether it did. */
  let budgetStop: { taskId: string | null } | null = null;
  let budgetStopped = false;
  let state = initial;
  let failure: string | null = null;
  /** Tasks finished and not verified yet (their checks run after the next turn that leaves nothing pending). */
  const unverified: string[] = [];
  /** This turn's result, made already by the step of the turn before (a parallel task's closing turn: see closes). */
  let made: TurnStepResult | null = first;
  for (let turn = 0; ; turn++) {
    let result: TurnStepResult;
    const todosBefore = new Map(state.todos.map((t) => [t.id, t.status]));
    const carried = made;
    made = null;
    for (let t = 0; ; t++) {
      const key = `${prefix}:turn:${turn}${t ? `:retry:${t}` : ""}`;
      const current = state;
      const approvedPlan = plans.approved;
      const stageDeadline = deadline(flow, flow.stageStart, "implementation");
      const pending = [...unverified];
      const closingKey = `${prefix}:turn:${turn + 1}`;
      result =
        t === 0 && carried
          ? carried
          : ((await runStep(key, async () => {
              const stepStartedAt = Date.now();
              const turned = await implementTurn({ runId, stepKey: key, state: current, plan: approvedPlan, attempt, deadline: stageDeadline, taskId, workspace, stepStartedAt });
              if (!taskId || !closes(flow, approvedPlan, turned, { before: todosBefore, unverified: pending, deadline: stageDeadline, budgetStop })) return turned;
              // The session's next turn — the model's closing word on its one task — in this same step (see closes).
              const closing = await implementTurn({ runId, stepKey: closingKey, state: turned.state, plan: approvedPlan, attempt, deadline: stageDeadline, taskId, workspace, stepStartedAt });
              return { ...turned, closing };
            })) as TurnStepResult & { closing?: TurnStepResult });
      const closing = (result as { closing?: TurnStepResult }).closing;
      if (closing) made = closing;
      if (result.kind === "pause_requested") {
        // Paused by a person between turns: the work so far is committed, the sandbox freed; the same turn
        // runs once the run is resumed.
        await pauseUntilResumed(flow, key, "by_person", result.message, "implementation");
        continue;
      }
      if (result.kind === "secret_detected") {
        // Nothing was committed; a person retries, and the turn is redone with the model told why.
        state = result.state;
        await pauseUntilResumed(flow, key, "secret_detected", result.message, "implementation");
        continue;
      }
      // The model had not answered within the step's time: the same turn again, in a fresh step.
      if (result.kind === "step_budget") continue;
      if (result.kind !== "model_error") break;
      await pauseForModel(flow, key, result, "implementation");
    }
    state = result.state;
    if (state.pendingCommand && result.kind !== "failure") {
      // A command outlived its step: it runs on detached and is collected here, in steps that each fit the
      // host's duration limit, before anything else happens (a gate would park, and so stop, the sandbox).
      const collected = await awaitCommand(flow, `${prefix}:turn:${turn}:command`, state, plans.approved, deadline(flow, flow.stageStart, "implementation"));
      state = collected.state;
      if (result.kind === "command_running" || (collected.kind === "policy" && result.kind === "continue")) result = collected;
    }
    if (result.kind !== "failure") {
      for (const t of state.todos) {
        if (t.status === "done" && todosBefore.get(t.id) !== "done" && !unverified.includes(t.id)) unverified.push(t.id);
      }
    }
    // Per-task verification (seed 003): the finished tasks' own acceptance commands, then a debug step on a failure.
    // Tasks without acceptance commands have nothing to run, so they get no step: verifyTasks would find nothing and
    // record nothing, and in a parallel task it is a race-mode step — two calls of the run, each replaying it — on the
    // lane's way from a task's last turn to its next task. Decided from the approved plan, so replays agree; a verify
    // step a run memoized before this is simply not asked for again.
    const verifying = config.verification?.enabled !== false && unverified.length > 0 && (result.kind === "continue" || result.kind === "done");
    if (verifying && !unverified.some((id) => (plans.approved.tasks.find((t) => t.id === id)?.checks ?? []).length > 0)) unverified.length = 0;
    if (verifying && unverified.length) {
      const key = `${prefix}:turn:${turn}:verify`;
      const ids = unverified.splice(0);
      const counts = { ...debugAttempts };
      const approvedPlan = plans.approved;
      const checked = await runStep(key, () => verifyTasks({ runId, stepKey: key, plan: approvedPlan, taskIds: ids, attempts: counts, sandboxOf: taskId, workspace }));
      if (checked.failed) {
        // Tasks after the failing one were not checked yet: they are, after the fix.
        unverified.push(...ids.slice(ids.indexOf(checked.failed.taskId) + 1));
        const debugged = await debugFailure(flow, plans, key, attempt, state, checked.failed);
        // A parallel task's approved re-plan: its session ends here, unmerged (as at an implementer's re-plan).
        if (debugged.replanned) return { state: debugged.state, failure: null, budgetStopped: false, replanned: true };
        state = debugged.state;
        // A session that had finished goes on with the task open again.
        if (result.kind === "done" && state.status === "running") result = { kind: "continue", state, now: result.now };
      }
    }
    if (result.now > deadline(flow, flow.stageStart, "implementation")) {
      await pauseUntilResumed(flow, `${prefix}:turn:${turn}:timeout`, "timeout", `Implementation ran over ${config.timeoutMinutes.implementation} minutes.`, "implementation");
    }
    const budget = config.budgets?.implementation;
    if (budget && !budgetStop && (result.kind === "continue" || result.kind === "command_running" || result.kind === "policy" || result.kind === "clarification")) {
      const key = `${prefix}:turn:${turn}:budget`;
      const raised = { ...budgetRaised.implementation };
      const check = await runStep(key, () => budgets.checkBudget({ runId, stage: "implementation", budget, raised }));
      if (check.exceeded) {
        const decision = await budgetGate(flow, key, check.exceeded);
        if (decision.action === "raise") {
          budgetRaised.implementation = budgets.addSpent(budgetRaised.implementation, decision.raise);
        } else {
          const stop = budgets.applyBudgetStop(state);
          state = stop.state;
          budgetStop = { taskId: stop.taskId };
        }
      }
    }
    if (budgetStop && (result.kind === "continue" || result.kind === "command_running")) {
      const task = budgetStop.taskId;
      if (task === null || state.todos.find((t) => t.id === task)?.status === "done") {
        // The task is finished: stop spending. Validation judges what is there; a failure goes to a person.
        budgetStopped = true;
        break;
      }
    }
    if (result.kind === "mcp") {
      const key = `${prefix}:turn:${turn}:mcp`, current = state; // an MCP tool call: a step of its own, never repeated once finished
      state = (await runStep(key, () => callMcpTool({ runId, stepKey: key, state: current, taskId, workspace }))).state as ImplementerState;
      continue;
    }
    if (result.kind === "continue" || result.kind === "command_running") continue;
    if (result.kind === "clarification") {
      const key = `${prefix}:turn:${turn}:q`;
      // A parallel task's question is answered in the task: the other tasks work on meanwhile.
      const closed = await clarifyOrSendBack(flow, key, "implementation", result);
      if (!closed.sentBack) {
        state = applyAnswer(state, closed.answer);
        continue;
      }
      const sent = await sendBackToPlanning(flow, plans, key, attempt, state, result.question);
      // A parallel task's approved re-plan: its session ends here, unmerged (as at an implementer's re-plan).
      if (sent.replanned) return { state: sent.state, failure: null, budgetStopped: false, replanned: true };
      state = sent.state;
      continue;
    }
    if (result.kind === "policy") {
      // A risky action (the project's policy): a person sees the exact action and approves or refuses it; the
      // implementer is told, and may then do exactly that action once.
      const action = result.action;
      const decision = await gate(flow, `${prefix}:turn:${turn}:policy`, "policy", {
        reason: action.reason,
        summary: `\`${action.summary}\` (${action.tool})`,
        action,
      });
      state = applyPolicy(state, action, decision);
      continue;
    }
    if (result.kind === "replan") {
      // PAOR: an observation broke the plan. The planner re-plans with it, and the new plan goes through the plan
      // gate whatever trustMode.planning says: an approved plan is a contract.
      const key = `${prefix}:turn:${turn}:replan`;
      // A parallel task's proposal goes to the run's one plan gate (`plans` is the run's, shared by its tasks): it
      // joins another task's re-plan under way rather than opening a second gate; the others work on meanwhile.
      const from = taskId ? ` (in task ${taskId})` : "";
      const replanned = await replan(flow, plans, key, `Re-plan proposed by the implementer${from}. Observation: ${result.observation} Proposal: ${result.proposal}`, {
        counted: true,
        attempt,
      });
      if (replanned.plan) plans.approved = replanned.plan;
      // The wait at the gate is not implementation time.
      if (replanned.now !== null) flow.stageStart = replanned.now;
      if (taskId && replanned.planChanged) {
        // The run's plan changed: this task's session ends here, unmerged (its worktree and branch go); the rounds go
        // on with the new plan, where the task — if it is still there — starts afresh.
        await runStep(`${key}:drop`, () => dropTask({ runId, taskId, workspace }));
        return { state, failure: null, budgetStopped: false, replanned: true };
      }
      state = await applyReplan(state, replanned);
      continue;
    }
    if (result.kind === "failure") failure = `${result.reason}: ${result.message}`;
    break;
  }
  return { state, failure, budgetStopped };
}

/**
 * The implementation gate (trustMode.implementation manual): a person sees the diff and approves, or rejects it with
 * feedback for the next attempt (past limits.maxFixAttempts the run fails).
 */
export async function reviewImplementation(flow: RunFlow, attempt: number, state: ImplementerState): Promise<{ approved: true } | { approved: false; feedback: string }> {
  const summary = await flow.runStep(`impl:${attempt}:diff`, () => diffSummary({ runId: flow.runId }));
  const decision = await gate(flow, `impl-gate:${attempt}`, "implementation", { diffStat: summary.diffStat, summary: state.summary });
  if (decision.decision === "approve") return { approved: true };
  const feedback = decision.notes ?? "The implementation was rejected.";
  if (attempt > flow.config.limits.maxFixAttempts) throw new NonRetriableError(`The implementation was rejected ${attempt} times.`);
  return { approved: false, feedback };
}
