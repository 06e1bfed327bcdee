import { decisionKey } from "@/lib/runs/gates/acks";
import type { GateRow } from "@/lib/runs/gates/decide";
import * as gates from "@/lib/runs/gates/decide-gate";
import * as runs from "@/lib/runs/gates/decide-run";
import * as clarifications from "@/lib/runs/gates/decide-clarification";
import { decideBudget } from "@/lib/runs/gates/decide-budget";
import { announce, announceDecision } from "./announce";
import { clarificationAnswered, gateDecided, mergeDecided, runCancelled, runResumed } from "./events";

/*
 * A person's decision, one function per kind, as every route calls it: stored first (lib/runs/gates: of concurrent
 * decisions exactly one applies, the rest are refused), then announced. A decision a waiting run must take (a gate, a
 * question, a resume) is announced under its decision key, so the re-announcer repeats it until the run acknowledges
 * it. A failed announcement is logged, never thrown (announce.ts): the run still finds the stored decision.
 */

/** A stored gate decision, announced to the run waiting at the gate. */
async function announced(runId: string, gate: GateRow, decision: string): Promise<GateRow> {
  await announceDecision({ event: gateDecided.create({ runId, gateId: gate.id, decision }), key: decisionKey.gate(gate.id) });
  return gate;
}

export async function approve(args: Parameters<typeof gates.approveGate>[0]) {
  return announced(args.runId, await gates.approveGate(args), "approve");
}

export async function reject(args: Parameters<typeof gates.rejectGate>[0]) {
  return announced(args.runId, await gates.rejectGate(args), "reject");
}

/** "Ask back" on a plan gate: the planner answers the question and gives a revised plan; not a rejection. */
export async function askBack(args: Parameters<typeof gates.askBack>[0]) {
  return announced(args.runId, await gates.askBack(args), "ask");
}

/** A fix decision (retry, accept, cancel); a cancel also ends the run, announced as a cancellation. */
export async function fix(args: Parameters<typeof gates.decideFix>[0]) {
  const gate = await announced(args.runId, await gates.decideFix(args), args.input.decision);
  if (args.input.decision === "cancel") await announce(runCancelled.create({ runId: args.runId }));
  return gate;
}

/** A budget gate's way on: raise the budget, or finish the task in progress and stop. */
export async function budget(args: Parameters<typeof decideBudget>[0]) {
  return announced(args.runId, await decideBudget(args), args.input.action);
}

/** A question answered or skipped: both wake the waiting run the same way (it reads which from the stored row). */
async function announcedClarification<T extends { id: string; workflowRunId: string }>(clarification: T): Promise<T> {
  await announceDecision({
    event: clarificationAnswered.create({ runId: clarification.workflowRunId, clarificationId: clarification.id }),
    key: decisionKey.clarification(clarification.id),
  });
  return clarification;
}

export async function answer(args: Parameters<typeof clarifications.answerClarification>[0]) {
  return announcedClarification(await clarifications.answerClarification(args));
}

/** Skip a question: "proceed with your best judgement" (recorded as CLARIFICATION_IGNORED). */
export async function skip(args: Parameters<typeof clarifications.skipClarification>[0]) {
  return announcedClarification(await clarifications.skipClarification(args));
}

/** Resume a paused run (`retry`, or `extend` after a timeout); told apart from earlier resumes by its event's sequence. */
export async function resume(args: Parameters<typeof runs.resumeRun>[0]) {
  const run = await runs.resumeRun(args);
  await announceDecision({ event: runResumed.create({ runId: args.runId, action: args.action }), key: decisionKey.resume(run.lastSequence) });
  return run;
}

/** Cancel the run: announced once, to the run (its cancelOn) and the clean-up; the stored cancellation ends it anyway. */
export async function cancel(args: Parameters<typeof runs.cancelRun>[0]) {
  const run = await runs.cancelRun(args);
  await announce(runCancelled.create({ runId: args.runId }));
  return run;
}

/** Merge a completed run: the run-merge function takes the announcement (MERGE_DECIDED is stored). */
export async function merge(args: Parameters<typeof runs.decideMerge>[0]) {
  const run = await runs.decideMerge(args);
  await announce(mergeDecided.create({ runId: run.id }));
  return run;
}

/** Pause a running run: stored only, not announced; the run reads the request at its next step boundary. */
export async function pause(args: Parameters<typeof runs.requestPause>[0]) {
  return runs.requestPause(args);
}
