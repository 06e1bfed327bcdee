import { NonRetriableError } from "inngest";
import { clarificationAnswered, decisionNotify, gateDecided, runCancelled, runResumed, runWaitClosed, slotFreed } from "../events";
import { slotFreedEvents } from "../slots";
import * as budgets from "@/lib/runs/budget";
import * as deadlines from "@/lib/runs/deadlines";
import { ask, openGate, readClarification, readGate } from "@/lib/runs/gates/open";
import { RunEndedError, workflowClock, type WaitResult } from "@/lib/runs/steps/context";
import { pause, pausedForStorage, pausedForTimeout, pauseRequested, readResume, waitsForNoOne } from "@/lib/runs/steps/pause";
import { IllegalTransitionError } from "@/lib/workflow";
import { requeueIfFull, tryStart } from "@/lib/runs/steps/start";
import { restore } from "@/lib/runs/steps/workspace";
import type { GitHubStepResult } from "@/lib/runs/steps/github";
import type { DecisionDeadlineInfo, DecisionSubject, PlanDocument, Stage } from "@/lib/workflow";
import type { ClarificationResponseType } from "@/lib/agents";
import type { RunFlow } from "./flow";

/*
 * The run's waits: for a slot of the user's concurrency limit, for a person (a gate, a question, a resume after a
 * pause), with reminders and deadlines, and the re-announcement of a freed slot. The run holds no slot while it waits
 * for a person, and its workspace is parked meanwhile and restored after. A GitHub step whose credentials GitHub keeps
 * refusing waits the same way (paused until a person resumes the run).
 *
 * Waiting for a person is "check the database, then wait for the announcement" in a loop: the decision is stored
 * before it is announced, so an announcement that comes early, late or never cannot lose it.
 */

/** How long one wait lasts before the stored state is checked again (a safety net for a lost announcement). */
const RECHECK_AFTER = "6h";
const RECHECK_AFTER_MS = 6 * 3_600_000;

/**
 * Check the stored state; while it is pending, wait for its announcement (or the re-check timer) and look again.
 * With a deadline (config.deadlines, fixed when the decision opened), the wait also ends at the next reminder
 * point or the deadline: durable waits with an absolute timeout, so the schedule survives restarts.
 */
export async function waitFor<T extends object>(
  flow: RunFlow,
  key: string,
  check: () => Promise<WaitResult<T>>,
  announcement: string,
  timed?: { subject: DecisionSubject; deadline: DecisionDeadlineInfo | null },
): Promise<T> {
  const { runId, step, runStep } = flow;
  const deadline = timed?.deadline ?? null;
  // Reminders sent so far, and whether the deadline is still ahead (an escalated decision waits on without one).
  let reminded = 0;
  let due = deadline !== null;
  for (let i = 0; ; i++) {
    const result = (await runStep(`${key}:check:${i}`, async () => {
      const read = await check();
      // The time of the check, memoized: which reminder or deadline is next is decided from it on every replay.
      return read.state === "pending" ? { ...read, now: workflowClock.now() } : read;
    })) as WaitResult<T> & { now?: number };
    if (result.state === "ended") throw new RunEndedError(result.status);
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
          throw new RunEndedError("cancelled");
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
export async function waitForSlot(flow: RunFlow, prefix: string) {
  const { runId, step, runStep, run } = flow;
  for (let i = 0; ; i++) {
    // The first start keeps its historical step key; a start after a requeue records under its own.
    const stepKey = prefix === "slot" ? "start" : `${prefix}:${i}`;
    const slot = await runStep(`${prefix}:${i}`, () => tryStart({ runId, stepKey }));
    if (slot.started) return;
    if (slot.status !== "queued") throw new RunEndedError(slot.status);
    await step.waitForEvent(`${prefix}:${i}:wait`, { event: slotFreed, timeout: "10m", if: `async.data.userId == '${run.userId}'` });
  }
}

/** The run now waits for a person and computes nothing: its slot is free for the user's queued runs. */
export async function releaseSlot(flow: RunFlow, key: string) {
  // A parallel task waits alone: the run's other tasks compute on, in the run's one slot.
  if (flow.task) return;
  await flow.step.sendEvent(`${key}:free-slot`, slotFreedEvents({ runId: flow.runId, userId: flow.run.userId }));
}

/** Back from a wait: compute again only within the user's limit; otherwise queue until a slot frees. */
async function reacquireSlot(flow: RunFlow, key: string) {
  if (flow.task) return;
  const requeued = await flow.runStep(`${key}:slot`, () => requeueIfFull({ runId: flow.runId, stepKey: `${key}:slot` }));
  if (!requeued.queued) return;
  await waitForSlot(flow, `${key}:slot`);
}

/** Pause (outage, timeout, invalid plan) until a person retries or extends; the sandbox is parked meanwhile. */
export async function pauseUntilResumed(
  flow: RunFlow,
  key: string,
  reason: Parameters<typeof pause>[0]["reason"],
  message: string,
  stage: Stage | null,
  plan?: PlanDocument | null,
  /** When the step that met the full or read-only disk began (reason storage). */
  failedAt?: number,
) {
  const { runId, runStep } = flow;
  // A parallel task that meets the full or read-only disk while the run is paused for it (or was resumed from such a
  // pause since) joins that pause; one over the stage's time is covered by an extend given since its deadline (while
  // another task's timeout pause is open its own open is busy, so it meets that extend): one overrun of the stage, one
  // pause, one extend for all its tasks.
  const due = reason === "timeout" && stage && stage !== "delivery" ? flow.stageStart + flow.config.timeoutMinutes[stage] * 60_000 : null;
  const join =
    reason === "storage"
      ? async () => ((await pausedForStorage({ runId, failedAt })) ? { tree: null, joined: true } : null)
      : due !== null
        ? async () => ((await pausedForTimeout({ runId, due })) ? { tree: null, joined: true } : null)
        : undefined;
  const parked = await openWhenFree(flow, `${key}:pause`, () => pause({ runId, stepKey: `${key}:pause`, reason, message, stage, plan, taskId: flow.task?.id ?? null }), join);
  await releaseSlot(flow, `${key}:pause`);
  // A task that joined another's pause reads the resume without acknowledging it: the re-announcer repeats the resume
  // until the opener's own wait has taken it (its wait may have been stored just after the first announcement).
  const joined = "joined" in parked && parked.joined === true;
  const resumed = await waitFor(flow, `${key}:resume`, () => readResume({ runId, acknowledge: !joined }), runResumed.name);
  flow.stageStart = resumed.now;
  await announceWaitClosed(flow, `${key}:resume`);
  await reacquireSlot(flow, `${key}:resume`);
  if (parked.tree) await runStep(`${key}:restore`, () => restore({ runId, expectedTree: parked.tree! }));
  return resumed;
}

/** A model outage (or refused credentials) in a stage: paused until a person retries. */
export function pauseForModel(flow: RunFlow, key: string, failed: { reason: string; message: string }, stage: Stage) {
  return pauseUntilResumed(flow, key, failed.reason === "model_auth" ? "model_auth" : "model_outage", failed.message, stage);
}

/**
 * A pause a person asked for while no implementation turn was left to honour it (during validation, or the last
 * turn): honoured here, at a stage boundary, before the next stage starts.
 */
export async function honourPauseRequest(flow: RunFlow, key: string, stage: Stage) {
  const asked = await flow.runStep(`${key}:pause-request`, () => pauseRequested({ runId: flow.runId }));
  if (asked) await pauseUntilResumed(flow, `${key}:pause-request`, "by_person", asked.message, stage);
}

/** A gate or question opened: the people who may decide are notified, off the run's path (notify-decision). */
async function notifyOpened(flow: RunFlow, key: string, subject: { type: "gate" | "clarification"; id: string }) {
  await flow.step.sendEvent(`${key}:notify`, decisionNotify.create({ runId: flow.runId, subject, reason: "opened" }));
}

type GateKind = Parameters<typeof openGate>[0]["kind"];

/**
 * The longest a parallel task that found the run busy waits before it looks again by itself (seconds): 1, 2, 4 … then
 * this. It is woken sooner by the run's `runWaitClosed`; the time-out is the safety net for a wake it missed (on Inngest
 * a wait sees only events sent after it was stored). An hour keeps a task that waits days behind another task's
 * question at two steps an hour, well within Inngest Cloud's steps per run.
 */
export const BUSY_RECHECK_MAX_S = 3600;

/** Seconds until a task that found the run busy for the `i`-th time looks again unless woken (0-based). */
export function busyRecheckSeconds(i: number): number {
  return Math.min(2 ** Math.min(i, 30), BUSY_RECHECK_MAX_S);
}

/**
 * A parallel task found the run busy (another task's wait for a person or re-plan): wait until that ends — the run
 * announces it (`announceWaitClosed`) — or, at the latest, `busyRecheckSeconds(i)`. A durable wait, keyed `key`.
 */
export async function untilWaitCloses(flow: RunFlow, key: string, i: number): Promise<void> {
  await flow.step.waitForEvent(key, { event: runWaitClosed, timeout: `${busyRecheckSeconds(i)}s`, match: "data.runId" });
}

/** A parallel task's wait for a person, or its re-plan, ended: the run's tasks that found it busy look again now. */
export async function announceWaitClosed(flow: RunFlow, key: string): Promise<void> {
  if (!flow.task) return;
  await flow.step.sendEvent(`${key}:closed`, runWaitClosed.create({ runId: flow.runId }));
}

/**
 * The step that opens a wait for a person (a gate, a question, a pause). A run has one such wait at a time, so a
 * parallel task whose run already waits for a person (another task's question) waits until that wait ends
 * (untilWaitCloses) while the others compute on, then tries again; the check and the open are one step, and an open
 * that lost a race to another task's (an illegal transition, nothing written) counts as busy too. The run's own flow
 * opens at once.
 */
async function openWhenFree<T>(flow: RunFlow, key: string, open: () => Promise<T>, join?: () => Promise<T | null>): Promise<T> {
  if (!flow.task) return flow.runStep(key, open);
  for (let i = 0; ; i++) {
    const k = i ? `${key}:when-free:${i}` : key;
    const out = (await flow.runStep(k, async () => {
      // `join`: the wait already open is this one's too (a pause for the disk), its value then stands for the open's.
      const joined = join ? await join() : null;
      if (joined !== null) return { busy: false as const, value: joined };
      if (!(await waitsForNoOne({ runId: flow.runId, taskId: flow.task!.id }))) return { busy: true as const };
      try {
        return { busy: false as const, value: await open() };
      } catch (error) {
        if (error instanceof IllegalTransitionError || (error as { cause?: unknown } | null)?.cause instanceof IllegalTransitionError) return { busy: true as const };
        throw error;
      }
    })) as { busy: true } | { busy: false; value: T };
    if (!out.busy) return out.value;
    // The key a durable sleep had before the wake (a run that slept here replays its result as a time-out).
    await untilWaitCloses(flow, `${k}:busy`, i);
  }
}

/**
 * A gate: opened with its context, announced to the people who may decide, decided by a person (`read` is its
 * stored decision). The run holds no slot while it waits, and its workspace is restored after.
 */
async function decideGate<T extends { now: number }>(
  flow: RunFlow,
  key: string,
  kind: GateKind,
  context: Record<string, unknown>,
  read: (gateId: string) => Promise<WaitResult<T>>,
  /**
   * A parallel task's gate checked again in its open step (once no other wait is open): its context now, or null when
   * the gate is no longer needed (nothing opens, and the gate returns null).
   */
  recheck?: () => Promise<Record<string, unknown> | null>,
): Promise<T | null> {
  const { runId, runStep } = flow;
  const opened = await openWhenFree(flow, `${key}:open`, async () => {
    const now = recheck ? await recheck() : context;
    if (!now) return { covered: true as const };
    return openGate({ runId, stepKey: `${key}:open`, kind, context: now, taskId: flow.task?.id ?? null });
  });
  if ("covered" in opened) return null;
  await notifyOpened(flow, `${key}:open`, { type: "gate", id: opened.gateId });
  await releaseSlot(flow, `${key}:open`);
  const decision = await waitFor(flow, `${key}:decision`, () => read(opened.gateId), gateDecided.name, {
    subject: { type: "gate", id: opened.gateId },
    deadline: opened.deadline ?? null,
  });
  flow.stageStart = decision.now;
  await announceWaitClosed(flow, `${key}:decision`);
  await reacquireSlot(flow, `${key}:decision`);
  if (opened.tree) await runStep(`${key}:restore`, () => restore({ runId, expectedTree: opened.tree! }));
  return decision;
}

/** A gate: opened with its context, decided by a person. */
export async function gate(flow: RunFlow, key: string, kind: GateKind, context: Record<string, unknown>) {
  return (await decideGate(flow, key, kind, context, (gateId) => readGate({ runId: flow.runId, gateId })))!;
}

/**
 * A budget gate: raise it (by how much), or finish the task in progress and stop; cancel ends the run. A stage's budget
 * is the stage's, whichever parallel task spends it: a task that crossed it while another task's budget gate was open
 * (or about to be) waits for that gate like any other wait, then checks again against every raise given so far — one
 * crossing, one gate. Covered, it goes on with nothing raised by itself (the raise is the other task's, and is the
 * run's once the round ends); still over, it opens its own gate with the spend as it is now.
 */
export async function budgetGate(flow: RunFlow, key: string, exceeded: budgets.BudgetExceeded) {
  const budget = flow.config.budgets?.[exceeded.stage as budgets.BudgetStage];
  const recheck =
    flow.task && budget
      ? async () => {
          const now = await budgets.recheckBudget({ runId: flow.runId, stage: exceeded.stage, budget });
          return now && { reason: budgets.describeExcess(now), ...now };
        }
      : undefined;
  const decision = await decideGate(
    flow,
    key,
    "budget",
    { reason: budgets.describeExcess(exceeded), ...exceeded },
    (gateId) => budgets.readBudgetDecision({ runId: flow.runId, gateId }),
    recheck,
  );
  return decision ?? { action: "raise" as const, raise: { ...budgets.NOTHING_SPENT }, now: flow.stageStart };
}

/**
 * Before more model calls of planning or validation: over the stage's budget (config.budgets), a person raises it
 * (asked again while a raise is not enough) or cancels the run. "Finish the task, then stop" is implementation's
 * alone (no task is in progress here; decideBudget refuses it).
 */
export async function spendGate(flow: RunFlow, key: string, stage: "planning" | "validation"): Promise<void> {
  const budget = flow.config.budgets?.[stage];
  if (!budget) return;
  for (let i = 0; ; i++) {
    const checkKey = `${key}:budget${i ? `:${i}` : ""}`;
    const raised = { ...flow.budgetRaised[stage] };
    const check = await flow.runStep(checkKey, () => budgets.checkBudget({ runId: flow.runId, stage, budget, raised }));
    if (!check.exceeded) return;
    const decision = await budgetGate(flow, checkKey, check.exceeded);
    flow.budgetRaised[stage] = budgets.addSpent(flow.budgetRaised[stage], decision.raise);
  }
}

type Question = { question: string; context: string | null; options: string[]; responseType: ClarificationResponseType };

/** A question from a stage; past maxClarifications it escalates to a gate. Returns the answer as text. */
export async function clarify(flow: RunFlow, key: string, stage: Stage, question: Question): Promise<string> {
  return (await clarifyOrSendBack(flow, key, stage, question)).answer;
}

/**
 * A question from a stage after planning: answered (the answer as text), skipped (best judgement), or skipped with
 * "send the run back to planning with the question" (`sentBack`: the caller re-plans through the plan gate).
 */
export async function clarifyOrSendBack(flow: RunFlow, key: string, stage: Stage, question: Question): Promise<{ answer: string; sentBack: boolean }> {
  const { runId, runStep } = flow;
  const asked = await openWhenFree(flow, `${key}:ask`, () => ask({ runId, stepKey: `${key}:ask`, stage, ...question, taskId: flow.task?.id ?? null }));
  await notifyOpened(flow, `${key}:ask`, asked.kind === "clarification" ? { type: "clarification", id: asked.clarificationId } : { type: "gate", id: asked.gateId });
  await releaseSlot(flow, `${key}:ask`);
  let answer: string;
  let sentBack = false;
  if (asked.kind === "clarification") {
    const answered = await waitFor(
      flow,
      `${key}:answer`,
      () => readClarification({ runId, clarificationId: asked.clarificationId }),
      clarificationAnswered.name,
      { subject: { type: "clarification", id: asked.clarificationId }, deadline: asked.deadline ?? null },
    );
    answer = answered.answer;
    sentBack = answered.sentBack === true;
    flow.stageStart = answered.now;
  } else {
    const decided = await waitFor(flow, `${key}:escalation`, () => readGate({ runId, gateId: asked.gateId }), gateDecided.name, {
      subject: { type: "gate", id: asked.gateId },
      deadline: asked.deadline ?? null,
    });
    flow.stageStart = decided.now;
    if (decided.decision === "reject") {
      throw new NonRetriableError(`The escalated question was rejected: ${decided.notes ?? "no reason given"}`);
    }
    // The typed answer (the same form as the question's), else the notes as free text.
    answer = decided.answer ?? (decided.notes?.trim() || "No answer was given; proceed with your best judgement and note the assumption.");
  }
  await announceWaitClosed(flow, `${key}:answered`);
  await reacquireSlot(flow, `${key}:answered`);
  if (asked.tree) await runStep(`${key}:restore`, () => restore({ runId, expectedTree: asked.tree! }));
  return { answer, sentBack };
}

/** A GitHub step; a 401 that a fresh installation token does not cure pauses the run until a person resumes it. */
export async function githubStep<T extends object>(
  flow: RunFlow,
  key: string,
  stage: Stage | null,
  fn: (stepKey: string) => Promise<GitHubStepResult<T>>,
) {
  for (let t = 0; ; t++) {
    const stepKey = t ? `${key}:retry:${t}` : key;
    const result = (await flow.runStep(stepKey, () => fn(stepKey))) as GitHubStepResult<T>;
    if (result.kind === "ok") return result;
    await pauseUntilResumed(flow, stepKey, "other", result.message, stage);
  }
}
