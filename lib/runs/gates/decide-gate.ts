import { z } from "zod";
import { AppError } from "@/lib/errors";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { planHash } from "@/lib/workflow/plan-hash";
import { applyPlanEdits } from "../plan-edits";
import { checkAnswer, redactAnswer, responseSchema } from "./answer";
import { decide, redacted, type GateDecision, type GateRow } from "./decide";
import { checkEditedPlan, editedPlanSchema } from "./edited-plan";

/* A person's decision at a gate: approve (a plan with edits, an escalated question with its answer), reject, ask back, fix. */

export const approveSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    notes: z.string().max(20_000).optional(),
    editedPlan: editedPlanSchema.optional(),
    /** An escalated question's answer, typed as the question asked it (see answerSchema). */
    response: responseSchema.optional(),
  })
  .transform(redacted);

export const askBackSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    question: z.string({ error: "is required" }).trim().min(1, "must ask the planner something").max(5_000),
  })
  .transform(redacted);

export const rejectSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    feedback: z.string({ error: "is required" }).trim().min(1, "must say what to change").max(20_000),
  })
  .transform(redacted);

export const fixDecisionSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    /** `replan` only at the fix gate about a stopped implementer, where `accept` is refused (nothing finished to accept). */
    decision: z.enum(["retry", "accept", "cancel", "replan"], { error: 'must be "retry", "accept", "replan" or "cancel"' }),
    notes: z.string().max(20_000).optional(),
  })
  .transform(redacted);

/**
 * The hash of the plan a plan gate's approval approves: the gate's plan with the person's edits applied exactly as the
 * workflow applies them (applyPlanEdits), so the run's plan and this hash agree. Frozen from here: a later change to
 * it needs a new approval, and the validator checks the plan it validates against this hash.
 */
function approvedHash(gate: GateRow, editedPlan: z.output<typeof approveSchema>["editedPlan"]): { planHash?: string } {
  const plan = gate.kind === "plan" ? (gate.context as { plan?: PlanDocument } | null)?.plan : undefined;
  if (!plan) return {};
  return { planHash: planHash(editedPlan ? applyPlanEdits({ drafted: plan, edited: editedPlan }) : plan) };
}

/** A fix gate about an implementer that stopped after the graduated intervention (inngest/run/stuck.ts). */
export function isStuckGate(gate: Pick<GateRow, "kind" | "context">): boolean {
  return gate.kind === "fix" && !!(gate.context as { stuck?: unknown } | null)?.stuck;
}

/** A plan gate about a diff outside the approved plan's files (inngest/run/validate.ts), not about a drafted plan. */
function isScopeGate(gate: GateRow): boolean {
  return gate.kind === "plan" && !!(gate.context as { scope?: unknown } | null)?.scope;
}

function notAFixGate(gate: GateRow) {
  if (gate.kind === "fix") {
    throw new AppError("conflict:gate", "This gate asks for a fix decision: use POST /api/runs/:id/fix-decision.");
  }
  // A budget gate has its own ways on (raise, finish the task then stop); a plain approve or reject would say neither.
  if (gate.kind === "budget") {
    throw new AppError("conflict:gate", 'This gate is a budget gate: use POST /api/runs/:id/budget ({action: "raise" | "finish_task"}) or POST /api/runs/:id/cancel.');
  }
}

export async function approveGate({ user, runId, input }: GateDecision<typeof approveSchema>) {
  if (input.editedPlan) await checkEditedPlan(input.editedPlan);
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      notAFixGate(gate);
      if (input.editedPlan && gate.kind !== "plan") {
        throw new AppError("bad_request:gate", "editedPlan: only a plan gate takes an edited plan.");
      }
      if (input.editedPlan && isScopeGate(gate)) {
        throw new AppError("bad_request:gate", "editedPlan: this plan gate decides a change of scope. Approve the wider scope as it is, or reject to send the work back to implementation.");
      }
      if (input.response !== undefined) {
        if (gate.kind !== "escalation") throw new AppError("bad_request:gate", "response: only an escalated question takes a typed response.");
        // Checked as the question asked it: a chosen option must be one offered, a file must be a file.
        const context = (gate.context ?? {}) as { responseType?: string; options?: string[] };
        checkAnswer({ responseType: context.responseType ?? "text", options: context.options?.length ? context.options : null }, input.response);
      }
    },
    claim: {
      status: "approved",
      decision: "approve",
      notes: input.notes ?? null,
      payload: input.editedPlan
        ? { editedPlan: input.editedPlan }
        : input.response !== undefined
          ? { response: redactAnswer(input.response) }
          : undefined,
    },
    events: (gate) => [
      {
        type: "APPROVAL_GRANTED",
        payload: { gateId: gate.id, by: user.id, notes: input.notes ?? null, editedPlan: !!input.editedPlan, ...approvedHash(gate, input.editedPlan) },
      },
    ],
  });
}

/**
 * "Ask back" on a plan gate: a person's question to the planner (PLAN_QUESTION_ASKED). The planner answers it and
 * gives a revised plan (a new version, at a new plan gate, with PLAN_QUESTION_ANSWERED); unlike a rejection it does
 * not count toward limits.maxReplans.
 */
export async function askBack({ user, runId, input }: GateDecision<typeof askBackSchema>) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      if (gate.kind !== "plan") throw new AppError("conflict:gate", `Gate ${gate.gateNumber} is a ${gate.kind} gate; only a plan gate takes a question to the planner.`);
      if (isScopeGate(gate)) throw new AppError("conflict:gate", `Gate ${gate.gateNumber} decides a change of scope, not a plan: approve the wider scope, reject (back to implementation) or cancel the run.`);
    },
    claim: { status: "asked", decision: "ask", notes: input.question },
    events: (gate) => [{ type: "PLAN_QUESTION_ASKED", payload: { gateId: gate.id, by: user.id, question: input.question } }],
  });
}

export async function rejectGate({ user, runId, input }: GateDecision<typeof rejectSchema>) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: notAFixGate,
    claim: { status: "rejected", decision: "reject", notes: input.feedback },
    events: (gate) => [{ type: "APPROVAL_REJECTED", payload: { gateId: gate.id, by: user.id, feedback: input.feedback } }],
  });
}

export async function decideFix({ user, runId, input }: GateDecision<typeof fixDecisionSchema>) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      if (gate.kind !== "fix") throw new AppError("conflict:gate", `Gate ${gate.gateNumber} is a ${gate.kind} gate, not a fix decision.`);
      if (isStuckGate(gate) && input.decision === "accept") {
        throw new AppError("conflict:gate", `Gate ${gate.gateNumber} asks about an implementer that stopped before finishing: retry (with a note for it), replan or cancel — there is no finished work to accept.`);
      }
      if (!isStuckGate(gate) && input.decision === "replan") {
        throw new AppError("conflict:gate", `Gate ${gate.gateNumber} decides a failed validation: retry, accept or cancel. "replan" is for an implementer that stopped.`);
      }
    },
    claim: { status: "decided", decision: input.decision, notes: input.notes ?? null },
    events: (gate) => [
      { type: "FIX_DECISION_MADE", payload: { gateId: gate.id, by: user.id, decision: input.decision } },
      ...(input.decision === "cancel"
        ? [{ type: "RUN_CANCELLED", payload: { by: user.id, reason: "cancelled at the fix decision" } } satisfies NewRunEvent]
        : []),
    ],
  });
}
