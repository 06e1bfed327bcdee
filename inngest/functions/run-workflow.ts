import { NonRetriableError } from "inngest";
import { inngest } from "../client";
import { clarificationAnswered, decisionNotify, gateDecided, mergeDecided, runCancelled, runResumed, runStarted, slotFreed } from "../events";
import * as ops from "@/lib/runs/workflow-ops";
import { slotFreedEvents } from "./decision-reannounce";
import * as githubOps from "@/lib/runs/github-ops";
import * as budgets from "@/lib/runs/budget";
import * as deadlines from "@/lib/runs/deadlines";
import * as estimates from "@/lib/runs/estimate";
import type { DecisionDeadlineInfo, DecisionSubject, PlanDocument, Stage } from "@/lib/workflow";
import type { ClarificationResponseType, ImplementerState } from "@/lib/agents";
import { log } from "@/lib/log";

/**
 * One coding request: plan → (gate) → implement → validate → deliver, as one durable function. Every side effect runs
 * inside a step (lib/runs/workflow-ops), so a crash never repeats a finished one; code between steps only decides what
 * to do next from memoized results, which keeps it deterministic on every replay.
 *
 * Waiting for a person is "check the database, then wait for the announcement" in a loop: the decision is stored
 * before it is announced, so an announcement that comes early, late or never cannot lose it.
 */

/** How long one wait lasts before the stored state is checked again (a safety net for a lost announcement). */
const RECHECK_AFTER = "6h";
const RECHECK_AFTER_MS = 6 * 3_600_000;

/** The key under which a step memoizes "the run had already ended" (see runStep). */
const ENDED = "__runEnded";

class RunEnded extends Error {
  constructor(readonly status: string) {
    super(`run ended: ${status}`);
  }
}

export const runWorkflow = inngest.createFunction(
  {
    id: "run-workflow",
    name: "Run: plan → gate → implement → validate → deliver",
    triggers: [runStarted],
    idempotency: "event.data.runId",
    cancelOn: [{ event: runCancelled, match: "data.runId" }],
    retries: 3,
    onFailure: async ({ event, error, step }) => {
      const runId = (event.data.event.data as { runId: string }).runId;
      const done = await step.run("record-failure", () =>
        ops.finishUnsuccessfully({ runId, reason: error.message, stepKey: "failure" }),
      );
      if (done.userId) await step.sendEvent("free-slot", slotFreedEvents({ runId, userId: done.userId }));
    },
  },
  async ({ event, step }) => {
    const runId = event.data.runId;

    /**
     * step.run, except that a step finding its run ended (cancelled meanwhile) is an ordinary outcome, not a step
     * error: it is memoized as such and ends the function quietly (RunEnded below), with one info line in the log.
     */
    async function runStep<T>(id: string, fn: () => Promise<T>): Promise<T> {
      const out = (await step.run(id, async () => {
        try {
          return await fn();
        } catch (error) {
          if (error instanceof ops.RunEndedError) return { [ENDED]: error.status };
          throw error;
        }
      })) as unknown;
      const ended = (out as Record<string, unknown> | null)?.[ENDED];
      if (typeof ended === "string") throw new RunEnded(ended);
      return out as T;
    }
    const run = await runStep("load", () => ops.loadRun({ runId }));
    const config = run.config;

    /**
     * Check the stored state; while it is pending, wait for its announcement (or the re-check timer) and look again.
     * With a deadline (config.deadlines, fixed when the decision opened), the wait also ends at the next reminder
     * point or the deadline: durable waits with an absolute timeout, so the schedule survives restarts.
     */
    async function waitFor<T extends object>(
      key: string,
      check: () => Promise<ops.WaitResult<T>>,
      announcement: string,
      timed?: { subject: DecisionSubject; deadline: DecisionDeadlineInfo | null },
    ): Promise<T> {
      const deadline = timed?.deadline ?? null;
      // Reminders sent so far, and whether the deadline is still ahead (an escalated decision waits on without one).
      let reminded = 0;
      let due = deadline !== null;
      for (let i = 0; ; i++) {
        const result = (await runStep(`${key}:check:${i}`, async () => {
          const read = await check();
          // The time of the check, memoized: which reminder or deadline is next is decided from it on every replay.
          return read.state === "pending" ? { ...read, now: ops.workflowClock.now() } : read;
        })) as ops.WaitResult<T> & { now?: number };
        if (result.state === "ended") throw new RunEnded(result.status);
        if (result.state === "done") return result as T;
        let next: number | null = null;
        if (timed && deadline && due) {
          const now = result.now ?? 0;
          if (now >= deadline.at) {
            const outcome = await runStep(`${key}:timeout`, () =>
              deadlines.timeOut({ runId, stepKey: `${key}:timeout`, subject: timed.subject, deadline }),
            );
            due = false;
            if (outcome.kind === "cancelled") {
              // As POST /cancel does: the cleanup function drops the sandbox and writes the records.
              await step.sendEvent(`${key}:timeout:cancelled`, runCancelled.create({ runId }));
              throw new RunEnded("cancelled");
            }
            if (outcome.kind === "escalated" || outcome.kind === "defaulted") {
              await step.sendEvent(
                `${key}:timeout:notify`,
                decisionNotify.create({
                  runId,
                  subject: timed.subject,
                  reason: outcome.kind,
                  ...(outcome.kind === "escalated" ? { recipients: outcome.recipients } : {}),
                }),
              );
            }
            continue;
          }
          if (reminded < deadline.reminders.length && now >= deadline.reminders[reminded]!) {
            // Several points passed at once (the run was down): one reminder, for the latest of them.
            while (reminded + 1 < deadline.reminders.length && now >= deadline.reminders[reminded + 1]!) reminded++;
            const index = reminded;
            const sent = await runStep(`${key}:remind:${index}`, () =>
              deadlines.remind({ runId, stepKey: `${key}:remind:${index}`, subject: timed.subject, reminder: index, deadline: deadline.at }),
            );
            if (sent.reminded) {
              await step.sendEvent(`${key}:remind:${index}:notify`, decisionNotify.create({ runId, subject: timed.subject, reason: "reminder" }));
            }
            reminded++;
            continue;
          }
          const at = reminded < deadline.reminders.length ? deadline.reminders[reminded]! : deadline.at;
          if (at - now < RECHECK_AFTER_MS) next = at;
        }
        await step.waitForEvent(`${key}:wait:${i}`, {
          event: announcement,
          timeout: next === null ? RECHECK_AFTER : new Date(next),
          // One shared expression (event.data.runId == async.data.runId) rather than one per run with its id inlined.
          match: "data.runId",
        });
      }
    }

    /** Queued: start (RUN_STARTED) as soon as a slot of the user's concurrency limit is free. */
    async function waitForSlot(prefix: string) {
      for (let i = 0; ; i++) {
        // The first start keeps its historical step key; a start after a requeue records under its own.
        const stepKey = prefix === "slot" ? "start" : `${prefix}:${i}`;
        const slot = await runStep(`${prefix}:${i}`, () => ops.tryStart({ runId, stepKey }));
        if (slot.started) return;
        if (slot.status !== "queued") throw new RunEnded(slot.status);
        await step.waitForEvent(`${prefix}:${i}:wait`, { event: slotFreed, timeout: "10m", if: `async.data.userId == '${run.userId}'` });
      }
    }

    /** The run now waits for a person and computes nothing: its slot is free for the user's queued runs. */
    async function releaseSlot(key: string) {
      await step.sendEvent(`${key}:free-slot`, slotFreedEvents({ runId, userId: run.userId }));
    }

    /** Back from a wait: compute again only within the user's limit; otherwise queue until a slot frees. */
    async function reacquireSlot(key: string) {
      const requeued = await runStep(`${key}:slot`, () => ops.requeueIfFull({ runId, stepKey: `${key}:slot` }));
      if (!requeued.queued) return;
      await waitForSlot(`${key}:slot`);
    }

    /**
     * When the stage's current working stretch began: the stage's start, or the end of the last wait for a person (a
     * pause, a gate, a question), whichever is later. `timeoutMinutes` counts from here: the time people take to decide
     * is never a stage's working time. Every wait helper below moves it (from its memoized decision's time).
     */
    let stageStart = 0;

    /** Pause (outage, timeout, invalid plan) until a person retries or extends; the sandbox is parked meanwhile. */
    async function pauseUntilResumed(
      key: string,
      reason: Parameters<typeof ops.pause>[0]["reason"],
      message: string,
      stage: Stage | null,
      plan?: PlanDocument | null,
    ) {
      const parked = await runStep(`${key}:pause`, () => ops.pause({ runId, stepKey: `${key}:pause`, reason, message, stage, plan }));
      await releaseSlot(`${key}:pause`);
      const resumed = await waitFor(`${key}:resume`, () => ops.readResume({ runId }), runResumed.name);
      stageStart = resumed.now;
      await reacquireSlot(`${key}:resume`);
      if (parked.tree) await runStep(`${key}:restore`, () => ops.restore({ runId, expectedTree: parked.tree! }));
      return resumed;
    }

    /**
     * A pause a person asked for while no implementation turn was left to honour it (during validation, or the last
     * turn): honoured here, at a stage boundary, before the next stage starts.
     */
    async function honourPauseRequest(key: string, stage: Stage) {
      const asked = await runStep(`${key}:pause-request`, () => ops.pauseRequested({ runId }));
      if (asked) await pauseUntilResumed(`${key}:pause-request`, "by_person", asked.message, stage);
    }

    /** A gate or question opened: the people who may decide are notified, off the run's path (notify-decision). */
    async function notifyOpened(key: string, subject: { type: "gate" | "clarification"; id: string }) {
      await step.sendEvent(`${key}:notify`, decisionNotify.create({ runId, subject, reason: "opened" }));
    }

    /**
     * A gate: opened with its context, announced to the people who may decide, decided by a person (`read` is its
     * stored decision). The run holds no slot while it waits, and its workspace is restored after.
     */
    async function decideGate<T extends { now: number }>(
      key: string,
      kind: Parameters<typeof ops.openGate>[0]["kind"],
      context: Record<string, unknown>,
      read: (gateId: string) => Promise<ops.WaitResult<T>>,
    ): Promise<T> {
      const opened = await runStep(`${key}:open`, () => ops.openGate({ runId, stepKey: `${key}:open`, kind, context }));
      await notifyOpened(`${key}:open`, { type: "gate", id: opened.gateId });
      await releaseSlot(`${key}:open`);
      const decision = await waitFor(`${key}:decision`, () => read(opened.gateId), gateDecided.name, {
        subject: { type: "gate", id: opened.gateId },
        deadline: opened.deadline ?? null,
      });
      stageStart = decision.now;
      await reacquireSlot(`${key}:decision`);
      if (opened.tree) await runStep(`${key}:restore`, () => ops.restore({ runId, expectedTree: opened.tree! }));
      return decision;
    }

    /** A gate: opened with its context, decided by a person. */
    function gate(key: string, kind: Parameters<typeof ops.openGate>[0]["kind"], context: Record<string, unknown>) {
      return decideGate(key, kind, context, (gateId) => ops.readGate({ runId, gateId }));
    }

    /** A budget gate: raise it (by how much), or finish the task in progress and stop; cancel ends the run. */
    function budgetGate(key: string, exceeded: budgets.BudgetExceeded) {
      return decideGate(key, "budget", { reason: budgets.describeExcess(exceeded), ...exceeded }, (gateId) => budgets.readBudgetDecision({ runId, gateId }));
    }

    /** What people added to each stage's budget at budget gates (memoized decisions: replays add the same). */
    const budgetRaised: Record<budgets.BudgetStage, budgets.Spent> = {
      planning: budgets.NOTHING_SPENT,
      implementation: budgets.NOTHING_SPENT,
      validation: budgets.NOTHING_SPENT,
    };

    /**
     * Before more model calls of planning or validation: over the stage's budget (config.budgets), a person raises it
     * (asked again while a raise is not enough) or cancels the run. "Finish the task, then stop" is implementation's
     * alone (no task is in progress here; decideBudget refuses it).
     */
    async function spendGate(key: string, stage: "planning" | "validation"): Promise<void> {
      const budget = config.budgets?.[stage];
      if (!budget) return;
      for (let i = 0; ; i++) {
        const checkKey = `${key}:budget${i ? `:${i}` : ""}`;
        const raised = { ...budgetRaised[stage] };
        const check = await runStep(checkKey, () => budgets.checkBudget({ runId, stage, budget, raised }));
        if (!check.exceeded) return;
        const decision = await budgetGate(checkKey, check.exceeded);
        budgetRaised[stage] = budgets.addSpent(budgetRaised[stage], decision.raise);
      }
    }

    /** A question from a stage; past maxClarifications it escalates to a gate. Returns the answer as text. */
    async function clarify(
      key: string,
      stage: Stage,
      question: { question: string; context: string | null; options: string[]; responseType: ClarificationResponseType },
    ): Promise<string> {
      const asked = await runStep(`${key}:ask`, () => ops.ask({ runId, stepKey: `${key}:ask`, stage, ...question }));
      await notifyOpened(`${key}:ask`, asked.kind === "clarification" ? { type: "clarification", id: asked.clarificationId } : { type: "gate", id: asked.gateId });
      await releaseSlot(`${key}:ask`);
      let answer: string;
      if (asked.kind === "clarification") {
        const answered = await waitFor(
          `${key}:answer`,
          () => ops.readClarification({ runId, clarificationId: asked.clarificationId }),
          clarificationAnswered.name,
          { subject: { type: "clarification", id: asked.clarificationId }, deadline: asked.deadline ?? null },
        );
        answer = answered.answer;
        stageStart = answered.now;
      } else {
        const decided = await waitFor(`${key}:escalation`, () => ops.readGate({ runId, gateId: asked.gateId }), gateDecided.name, {
          subject: { type: "gate", id: asked.gateId },
          deadline: asked.deadline ?? null,
        });
        stageStart = decided.now;
        if (decided.decision === "reject") {
          throw new NonRetriableError(`The escalated question was rejected: ${decided.notes ?? "no reason given"}`);
        }
        // The typed answer (the same form as the question's), else the notes as free text.
        answer = decided.answer ?? (decided.notes?.trim() || "No answer was given; proceed with your best judgement and note the assumption.");
      }
      await reacquireSlot(`${key}:answered`);
      if (asked.tree) await runStep(`${key}:restore`, () => ops.restore({ runId, expectedTree: asked.tree! }));
      return answer;
    }

    /** A GitHub step; a 401 that a fresh installation token does not cure pauses the run until a person resumes it. */
    async function github<T extends object>(key: string, stage: Stage | null, fn: (stepKey: string) => Promise<githubOps.GitHubStepResult<T>>) {
      for (let t = 0; ; t++) {
        const stepKey = t ? `${key}:retry:${t}` : key;
        const result = (await runStep(stepKey, () => fn(stepKey))) as githubOps.GitHubStepResult<T>;
        if (result.kind === "ok") return result;
        await pauseUntilResumed(stepKey, "other", result.message, stage);
      }
    }

    /**
     * A command left running detached by a turn: looked at in steps (each waits at most the step budget), with a
     * durable sleep between them, until it has ended and its result is in the conversation.
     */
    async function awaitCommand(key: string, current: ImplementerState, plan: PlanDocument, until: number) {
      for (let i = 0; ; i++) {
        const polled = await runStep(`${key}:${i}`, () => ops.pollCommand({ runId, stepKey: `${key}:${i}`, state: current, plan, deadline: until }));
        if (polled.kind !== "running") return polled;
        await step.sleep(`${key}:${i}:sleep`, ops.COMMAND_POLL_INTERVAL);
      }
    }

    /**
     * A planner step, made again in a fresh step (`<key>:part:<n>`) while its model call outlives the step's budget;
     * a cut diagram retry is made again as the retry.
     */
    async function planInSteps(
      key: string,
      plan: (stepKey: string, retry: ops.PlanRetry | null) => Promise<ops.PlanStepResult>,
    ): Promise<Exclude<ops.PlanStepResult, { kind: "step_budget" }>> {
      let retry: ops.PlanRetry | null = null;
      for (let part = 0; ; part++) {
        const stepKey = part ? `${key}:part:${part}` : key;
        const from: ops.PlanRetry | null = retry;
        const result: ops.PlanStepResult = await runStep(stepKey, () => plan(stepKey, from));
        if (result.kind !== "step_budget") return result;
        retry = result.retry;
      }
    }

    /**
     * One validation in steps that each fit the host's duration limit: an acceptance command that outlives its step
     * runs on detached and is looked at in later steps (a durable sleep between them), and a model call cut at the
     * step's end is made again in a fresh step; the checks already run are carried along, never run twice.
     */
    async function validateInSteps(
      key: string,
      plan: PlanDocument,
      attempt: number,
      until: number,
    ): Promise<Exclude<ops.ValidateStepResult, { kind: "checks_running" | "step_budget" }>> {
      let progress: ops.ValidationProgress | null = null;
      for (let part = 0; ; part++) {
        const stepKey = part ? `${key}:part:${part}` : key;
        const from: ops.ValidationProgress | null = progress;
        const result: ops.ValidateStepResult = await runStep(stepKey, () => ops.validate({ runId, stepKey, plan, attempt, deadline: until, progress: from }));
        if (result.kind !== "checks_running" && result.kind !== "step_budget") return result;
        progress = result.progress;
        if (result.kind === "checks_running") await step.sleep(`${stepKey}:sleep`, ops.COMMAND_POLL_INTERVAL);
      }
    }

    /** Stage deadlines come from memoized step times, so replays take the same decisions. */
    function deadline(startedAt: number, stage: Exclude<Stage, "delivery">) {
      return startedAt + config.timeoutMinutes[stage] * 60_000;
    }

    try {
      if (run.status === "completed" || run.status === "failed" || run.status === "cancelled") return { status: run.status };

      // Per-user concurrency: wait queued until a slot frees up.
      await waitForSlot("slot");
      if (run.github) await github("github:sync", null, () => githubOps.syncGitHub({ runId }));
      await runStep("branch", () => ops.createBranch({ runId }));

      // ---- Plan (and the plan gate)
      stageStart = (await runStep("planning:start", () => ops.startStage({ runId, stage: "planning", stepKey: "planning:start" }))).now;
      const feedback: string[] = [];
      const answers: Array<{ question: string; answer: string }> = [];
      let diagramAttempt = 0;
      let version = 0;
      let plan: PlanDocument;
      // "Ask back": a person's question on the last plan gate, answered by the next planner call (not a rejection).
      let question: { gateId: string; question: string; plan: PlanDocument } | null = null;
      for (let round = 0; ; round++) {
        let drafted: Extract<ops.PlanStepResult, { kind: "plan" }> | null = null;
        // An invalid diagram a person fixed by hand from the pause (POST /resume with editedPlan).
        let handFixed: { plan: PlanDocument; by: string } | null = null;
        let answered: { question: string; answer: string } | null = null;
        for (let t = 0; ; t++) {
          const key = `plan:${round}:${t}`;
          if (round > 0 || t > 0) {
            // Another planner call (a re-plan, a question answered, a diagram retried): within the planning budget.
            await spendGate(key, "planning");
          }
          const planningDeadline = deadline(stageStart, "planning");
          const planQuestion = question ? { question: question.question, plan: question.plan } : undefined;
          const result = await planInSteps(key, (stepKey, retry) =>
            ops.plan({ runId, stepKey, feedback, clarifications: answers, diagramAttempt, deadline: planningDeadline, planQuestion, retry }),
          );
          if (result.kind === "timeout") {
            // The planner's model call was cut at the deadline: a person extends (plan again) or cancels.
            await pauseUntilResumed(`${key}:timeout`, "timeout", `Planning ran over ${config.timeoutMinutes.planning} minutes.`, "planning");
            continue;
          }
          if (result.kind !== "model_error") diagramAttempt += result.diagramsProduced;
          if (result.kind === "model_error") {
            await pauseUntilResumed(key, result.reason === "model_auth" ? "model_auth" : "model_outage", result.message, "planning");
            continue;
          }
          if (result.kind === "invalid") {
            const resumed = await pauseUntilResumed(
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
            const answer = await clarify(`${key}:q`, "planning", result);
            answers.push({ question: result.question, answer });
            continue;
          }
          if (result.now > deadline(stageStart, "planning")) {
            await pauseUntilResumed(`${key}:timeout`, "timeout", `Planning ran over ${config.timeoutMinutes.planning} minutes.`, "planning");
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
          await runStep(recordKey, () => ops.recordPlan({ runId, stepKey: recordKey, plan: fixed.plan, version: fixedVersion, edited: true, by: fixed.by }));
        } else {
          const draft = drafted!;
          plan = draft.plan;
          const asked = question;
          const reply = asked ? { gateId: asked.gateId, question: asked.question, answer: draft.answer ?? "(The planner gave no answer.)" } : undefined;
          const draftVersion = version;
          await runStep(recordKey, () =>
            ops.recordPlan({ runId, stepKey: recordKey, plan: draft.plan, version: draftVersion, feedback: asked ? null : (feedback.at(-1) ?? null), answered: reply }),
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

        // The estimate for this plan (tokens, cost, time per stage), made once and kept with the gate it is shown on.
        const estimatePlan = plan;
        const estimateVersion = version;
        const estimate = await runStep(`plan-gate:${round}:estimate`, () => estimates.makeEstimate({ runId, plan: estimatePlan, version: estimateVersion }));
        const decision = await gate(`plan-gate:${round}`, "plan", { plan, version, estimate, ...(answered ? { answered } : {}) });
        if (decision.decision === "approve") {
          if (decision.editedPlan) {
            version += 1;
            // Tasks (with their files: the scope), acceptance commands and summary as edited; what was left out stays.
            plan = ops.applyPlanEdits({ drafted: plan, edited: decision.editedPlan });
            const editedKey = `plan:${round}:edited`;
            const edited = plan;
            const editedVersion = version;
            await runStep(editedKey, () =>
              ops.recordPlan({ runId, stepKey: editedKey, plan: edited, version: editedVersion, edited: true, by: decision.decidedBy ?? "unknown" }),
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
      await runStep("planning:done", () => ops.completeStage({ runId, stage: "planning", stepKey: "planning:done" }));
      let approvedPlan = plan!;
      let replans = 0;

      /** A re-plan the implementer proposed: drafted by the planner with the observation, decided at the plan gate. */
      async function replan(key: string, note: string): Promise<{ approved: boolean; plan: PlanDocument | null; notes: string | null }> {
        await runStep(`${key}:start`, () => ops.startStage({ runId, stage: "planning", stepKey: `${key}:start` }));
        await spendGate(`${key}:plan`, "planning");
        const drafted = await runStep(`${key}:plan`, () =>
          ops.plan({ runId, stepKey: `${key}:plan`, feedback: [...feedback, note], clarifications: answers, diagramAttempt }),
        );
        if (drafted.kind !== "plan") {
          await runStep(`${key}:done`, () => ops.completeStage({ runId, stage: "planning", stepKey: `${key}:done` }));
          const why = drafted.kind === "clarification" ? "the planner asked a question instead" : "message" in drafted ? drafted.message : drafted.kind;
          return { approved: false, plan: null, notes: `The re-plan could not be drafted (${why}).` };
        }
        version += 1;
        const draftedVersion = version;
        await runStep(`${key}:record`, () => ops.recordPlan({ runId, stepKey: `${key}:record`, plan: drafted.plan, version: draftedVersion, feedback: note }));
        const estimate = await runStep(`${key}:estimate`, () => estimates.makeEstimate({ runId, plan: drafted.plan, version: draftedVersion }));
        const decision = await gate(`${key}:gate`, "plan", { plan: drafted.plan, version: draftedVersion, replan: note, estimate });
        await runStep(`${key}:done`, () => ops.completeStage({ runId, stage: "planning", stepKey: `${key}:done` }));
        if (decision.decision !== "approve") return { approved: false, plan: null, notes: decision.notes ?? null };
        let chosen = drafted.plan;
        if (decision.editedPlan) {
          version += 1;
          chosen = ops.applyPlanEdits({ drafted: drafted.plan, edited: decision.editedPlan });
          const edited = chosen;
          const editedVersion = version;
          await runStep(`${key}:edited`, () =>
            ops.recordPlan({ runId, stepKey: `${key}:edited`, plan: edited, version: editedVersion, edited: true, by: decision.decidedBy ?? "unknown" }),
          );
        }
        return { approved: true, plan: chosen, notes: decision.notes ?? null };
      }
      /** Debug steps per task so far (the verdicts' attempts; a retry at the fix gate starts the count afresh). */
      const debugAttempts: Record<string, number> = {};

      /**
       * A task failed its own acceptance command (per-task verification): the debug step classifies it, and the run
       * fixes it (another implementer pass on the task, with the failure in context), asks a person, or escalates (a
       * re-plan through the plan gate for a plan problem, else the fix gate). Returns the implementer's next state.
       */
      async function debugFailure(
        key: string,
        implAttempt: number,
        current: ImplementerState,
        failure: ops.VerifyStepResult["failed"] & object,
      ): Promise<ImplementerState> {
        const { attempt: debugAttempt, ...failed } = failure;
        debugAttempts[failure.taskId] = debugAttempt;
        let debugged: ops.DebugStepResult;
        for (let t = 0; ; t++) {
          const k = `${key}:debug${t ? `:retry:${t}` : ""}`;
          debugged = await runStep(k, () => ops.debugTask({ runId, stepKey: k, plan: approvedPlan, failure: failed, attempt: debugAttempt }));
          if (debugged.kind === "verdict") break;
          await pauseUntilResumed(k, debugged.reason === "model_auth" ? "model_auth" : "model_outage", debugged.message, "implementation");
        }
        const { verdict, exhausted } = debugged;
        if (verdict.action === "fix") return ops.applyVerifyFailure(current, { failure: failed, verdict });
        if (verdict.action === "ask" && verdict.question) {
          const answer = await clarify(`${key}:q`, "implementation", {
            question: verdict.question,
            context: `Task ${failure.taskId}'s check \`${failure.command}\` failed (${verdict.category}): ${verdict.reason}`,
            options: [],
            responseType: "text",
          });
          return ops.applyVerifyFailure(current, { failure: failed, verdict, answer });
        }
        if (verdict.category === "plan" && verdict.parsed && !exhausted && replans < config.limits.maxReplans) {
          // The plan itself is wrong: a re-plan, decided at the plan gate (an approved plan is a contract).
          replans += 1;
          const replanned = await replan(
            `${key}:replan`,
            `Re-plan proposed by the debug step. Observation: task ${failure.taskId}'s acceptance command \`${failure.command}\` failed and the failure is the plan's: ${verdict.reason}`,
          );
          if (replanned.plan) approvedPlan = replanned.plan;
          const next = await ops.applyDebugReplanDecision(current, replanned);
          stageStart = (await runStep(`${key}:replan:resume`, () => ops.startStage({ runId, stage: "implementation", attempt: implAttempt, stepKey: `${key}:replan:resume` }))).now;
          return next;
        }
        const decision = await gate(`${key}:fix-gate`, "fix", {
          report: `Task ${failure.taskId} failed its check \`${failure.command}\` (exit ${failure.exitCode ?? "timed out"}). Debug step: ${verdict.category} — ${verdict.reason}${exhausted ? ` (after ${debugAttempt - 1} fix passes)` : ""}\n\n${failure.output}`,
          score: null,
          findings: [],
          attempt: debugAttempt,
          automaticFixesExhausted: exhausted,
          majorFindings: false,
          verification: { taskId: failure.taskId, command: failure.command, category: verdict.category },
        });
        if (decision.decision === "cancel") throw new RunEnded("cancelled");
        // Accepted: the task stays done as it is; validation still judges the whole.
        if (decision.decision === "accept") return current;
        debugAttempts[failure.taskId] = 0;
        return ops.applyVerifyFailure(current, { failure: failed, verdict, note: decision.notes ?? null });
      }

      // Triage: tasks already done in the repository (their own checks pass) are skipped, once for the run.
      const triaged = config.triage?.enabled === false ? { skip: [] } : await runStep("triage", () => ops.triage({ runId, plan: approvedPlan }));

      // ---- Implement → validate, with fixes
      let fixFeedback: string | null = null;
      for (let attempt = 1; ; attempt++) {
        /** "Finish the task in progress, then stop" (a budget gate's decision) for this attempt, and whether it did. */
        let budgetStop: { taskId: string | null } | null = null;
        let budgetStopped = false;
        const implStart = await runStep(`impl:${attempt}:start`, () =>
          ops.startStage({ runId, stage: "implementation", attempt, stepKey: `impl:${attempt}:start` }),
        );
        stageStart = implStart.now;
        const feedbackForAttempt = fixFeedback;
        let state = (await runStep(`impl:${attempt}:begin`, () =>
          ops.beginImplementation({
            runId,
            plan: approvedPlan,
            request: run.request,
            feedback: feedbackForAttempt,
            maxIterations: config.limits.maxIterations,
            skip: triaged.skip,
          }),
        )) as ImplementerState;
        let failure: string | null = null;
        /** Tasks finished and not verified yet (their checks run after the next turn that leaves nothing pending). */
        const unverified: string[] = [];
        for (let turn = 0; ; turn++) {
          let result: ops.TurnStepResult;
          const todosBefore = new Map(state.todos.map((t) => [t.id, t.status]));
          for (let t = 0; ; t++) {
            const key = `impl:${attempt}:turn:${turn}${t ? `:retry:${t}` : ""}`;
            const current = state;
            const stageDeadline = deadline(stageStart, "implementation");
            result = (await runStep(key, () =>
              ops.implementTurn({ runId, stepKey: key, state: current, plan: approvedPlan, attempt, deadline: stageDeadline }),
            )) as ops.TurnStepResult;
            if (result.kind === "pause_requested") {
              // Paused by a person between turns: the work so far is committed, the sandbox freed; the same turn
              // runs once the run is resumed.
              await pauseUntilResumed(key, "by_person", result.message, "implementation");
              continue;
            }
            if (result.kind === "secret_detected") {
              // Nothing was committed; a person retries, and the turn is redone with the model told why.
              state = result.state;
              await pauseUntilResumed(key, "secret_detected", result.message, "implementation");
              continue;
            }
            // The model had not answered within the step's time: the same turn again, in a fresh step.
            if (result.kind === "step_budget") continue;
            if (result.kind !== "model_error") break;
            await pauseUntilResumed(key, result.reason === "model_auth" ? "model_auth" : "model_outage", result.message, "implementation");
          }
          state = result.state;
          if (state.pendingCommand && result.kind !== "failure") {
            // A command outlived its step: it runs on detached and is collected here, in steps that each fit the
            // host's duration limit, before anything else happens (a gate would park, and so stop, the sandbox).
            const collected = await awaitCommand(`impl:${attempt}:turn:${turn}:command`, state, approvedPlan, deadline(stageStart, "implementation"));
            state = collected.state;
            if (result.kind === "command_running" || (collected.kind === "policy" && result.kind === "continue")) result = collected;
          }
          if (result.kind !== "failure") {
            for (const t of state.todos) {
              if (t.status === "done" && todosBefore.get(t.id) !== "done" && !unverified.includes(t.id)) unverified.push(t.id);
            }
          }
          if (config.verification?.enabled !== false && unverified.length && (result.kind === "continue" || result.kind === "done")) {
            // Per-task verification (seed 003): the finished tasks' own acceptance commands, then a debug step on a failure.
            const key = `impl:${attempt}:turn:${turn}:verify`;
            const ids = unverified.splice(0);
            const counts = { ...debugAttempts };
            const checked = await runStep(key, () => ops.verifyTasks({ runId, stepKey: key, plan: approvedPlan, taskIds: ids, attempts: counts }));
            if (checked.failed) {
              // Tasks after the failing one were not checked yet: they are, after the fix.
              unverified.push(...ids.slice(ids.indexOf(checked.failed.taskId) + 1));
              state = await debugFailure(key, attempt, state, checked.failed);
              // A session that had finished goes on with the task open again.
              if (result.kind === "done" && state.status === "running") result = { kind: "continue", state, now: result.now };
            }
          }
          if (result.now > deadline(stageStart, "implementation")) {
            await pauseUntilResumed(`impl:${attempt}:turn:${turn}:timeout`, "timeout", `Implementation ran over ${config.timeoutMinutes.implementation} minutes.`, "implementation");
          }
          const budget = config.budgets?.implementation;
          if (budget && !budgetStop && (result.kind === "continue" || result.kind === "command_running" || result.kind === "policy" || result.kind === "clarification")) {
            const key = `impl:${attempt}:turn:${turn}:budget`;
            const raised = { ...budgetRaised.implementation };
            const check = await runStep(key, () => budgets.checkBudget({ runId, stage: "implementation", budget, raised }));
            if (check.exceeded) {
              const decision = await budgetGate(key, check.exceeded);
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
          if (result.kind === "continue" || result.kind === "command_running") continue;
          if (result.kind === "clarification") {
            const answer = await clarify(`impl:${attempt}:turn:${turn}:q`, "implementation", result);
            state = ops.applyAnswer(state, answer);
            continue;
          }
          if (result.kind === "policy") {
            // A risky action (the project's policy): a person sees the exact action and approves or refuses it; the
            // implementer is told, and may then do exactly that action once.
            const action = result.action;
            const decision = await gate(`impl:${attempt}:turn:${turn}:policy`, "policy", {
              reason: action.reason,
              summary: `\`${action.summary}\` (${action.tool})`,
              action,
            });
            state = ops.applyPolicy(state, action, decision);
            continue;
          }
          if (result.kind === "replan") {
            // PAOR: an observation broke the plan. The planner re-plans with it, and the new plan goes through the plan
            // gate whatever trustMode.planning says: an approved plan is a contract.
            const key = `impl:${attempt}:turn:${turn}:replan`;
            replans += 1;
            const replanned =
              replans > config.limits.maxReplans
                ? { approved: false, plan: null, notes: `No more re-plans in this run (limits.maxReplans is ${config.limits.maxReplans}).` }
                : await replan(key, `Re-plan proposed by the implementer. Observation: ${result.observation} Proposal: ${result.proposal}`);
            if (replanned.plan) approvedPlan = replanned.plan;
            state = await ops.applyReplan(state, replanned);
            // The wait at the gate is not implementation time.
            stageStart = (await runStep(`${key}:resume`, () => ops.startStage({ runId, stage: "implementation", attempt, stepKey: `${key}:resume` }))).now;
            continue;
          }
          if (result.kind === "failure") failure = `${result.reason}: ${result.message}`;
          break;
        }

        // GitHub: the work so far goes up as a draft pull request, marked ready once validation passes.
        if (!failure && run.github && config.git.createPR) {
          await github(`github:draft:${attempt}`, "implementation", (key) => githubOps.publishDraft({ runId, stepKey: key }));
        }

        if (!failure && config.trustMode.implementation === "manual") {
          const summary = await runStep(`impl:${attempt}:diff`, () => ops.diffSummary({ runId }));
          const decision = await gate(`impl-gate:${attempt}`, "implementation", { diffStat: summary.diffStat, summary: state.summary });
          if (decision.decision !== "approve") {
            fixFeedback = decision.notes ?? "The implementation was rejected.";
            if (attempt > config.limits.maxFixAttempts) throw new NonRetriableError(`The implementation was rejected ${attempt} times.`);
            continue;
          }
        }

        let verdict: Extract<ops.ValidateStepResult, { kind: "result" }> | null = null;
        if (!failure) {
          await honourPauseRequest(`validate:${attempt}`, "validation");
          // Validation's budget (config.budgets.validation) counts every attempt's validator calls.
          await spendGate(`validate:${attempt}`, "validation");
          const validationStart = await runStep(`validate:${attempt}:start`, () =>
            ops.startStage({ runId, stage: "validation", attempt, stepKey: `validate:${attempt}:start` }),
          );
          stageStart = validationStart.now;
          for (let t = 0; ; t++) {
            const key = `validate:${attempt}${t ? `:retry:${t}` : ""}`;
            const until = deadline(stageStart, "validation");
            const result = await validateInSteps(key, approvedPlan, attempt, until);
            if (result.kind === "result") {
              verdict = result;
              break;
            }
            if (result.kind === "timeout") {
              await pauseUntilResumed(key, "timeout", `Validation ran over ${config.timeoutMinutes.validation} minutes.`, "validation");
              continue;
            }
            await pauseUntilResumed(key, result.reason === "model_auth" ? "model_auth" : "model_outage", result.message, "validation");
          }
          if (verdict.passed) break;
        }

        const report = verdict?.report ?? `Implementation failed: ${failure}`;
        const nextFeedback = verdict?.feedback ?? `The previous attempt failed (${failure}). Start again and finish every todo.`;
        // Routed by severity: only minor findings are retried automatically; a major one always goes to a person.
        const major = ((verdict?.findings ?? []) as Array<{ severity?: string }>).some((f) => f.severity === "major");
        if (config.trustMode.fixes === "auto" && attempt <= config.limits.maxFixAttempts && !major && !budgetStopped) {
          fixFeedback = nextFeedback;
          continue;
        }
        const decision = await gate(`fix-gate:${attempt}`, "fix", {
          report,
          score: verdict?.score ?? null,
          findings: verdict?.findings ?? [],
          attempt,
          automaticFixesExhausted: config.trustMode.fixes === "auto" && !major,
          majorFindings: major,
        });
        if (decision.decision === "accept") break;
        if (decision.decision === "cancel") throw new RunEnded("cancelled");
        fixFeedback = decision.notes ? `${nextFeedback}\n\nReviewer: ${decision.notes}` : nextFeedback;
      }

      // ---- Deliver
      await honourPauseRequest("delivery", "delivery");
      await runStep("delivery:start", () => ops.startStage({ runId, stage: "delivery", stepKey: "delivery:start" }));
      if (run.github) {
        await github("deliver:github", "delivery", (key) => githubOps.deliverGitHub({ runId, stepKey: key }));
      } else {
        for (let i = 0; ; i++) {
          const delivered = await runStep(`deliver:${i}`, () => ops.deliver({ runId, stepKey: `deliver:${i}`, merge: config.git.autoMerge }));
          if (delivered.merge !== "conflict") break;
          const decision = await gate(`conflict-gate:${i}`, "conflict", { files: delivered.files, reason: delivered.reason });
          if (decision.decision !== "approve") break;
        }
      }
      const done = await runStep("complete", () => ops.complete({ runId, stepKey: "complete" }));
      await step.sendEvent("free-slot", slotFreedEvents({ runId, userId: done.userId }));
      return { status: "completed" };
    } catch (error) {
      if (error instanceof RunEnded) {
        log.info("run ended; its workflow stops", { runId, status: error.status });
        return { status: error.status };
      }
      throw error;
    }
  },
);

/** A person decided to merge a completed run (POST /api/runs/:id/merge): make the merge, or record why it failed. */
export const runMerge = inngest.createFunction(
  { id: "run-merge", name: "Run: merge by a person's decision", triggers: [mergeDecided], retries: 3, concurrency: { limit: 1, key: "event.data.runId" } },
  async ({ event, step }) => step.run("merge", () => ops.mergeByDecision({ runId: event.data.runId })),
);

/**
 * A cancellation stops the run's function between or during steps, so nothing inside it cleans up: this drops the
 * run's sandbox, writes its records on the branch and frees its slot of the user's concurrency limit.
 */
export const runCancelledCleanup = inngest.createFunction(
  { id: "run-cancelled-cleanup", name: "Run: clean up after a cancellation", triggers: [runCancelled], retries: 3 },
  async ({ event, step }) => {
    const done = await step.run("clean-up", () => ops.cleanUpCancelled({ runId: event.data.runId }));
    if (done.userId) await step.sendEvent("free-slot", slotFreedEvents({ runId: event.data.runId, userId: done.userId }));
    return done;
  },
);
