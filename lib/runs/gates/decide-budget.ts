import { z } from "zod";
import { AppError } from "@/lib/errors";
import { describeRaise } from "../budget";
import { decide, type GateDecision } from "./decide";

/* A person's way on at a budget gate (lib/runs/budget.ts): raise the budget, or finish the task in progress and stop. */

export const budgetDecisionSchema = z
  .strictObject({
    gateId: z.string().trim().min(1).max(100).optional(),
    action: z.enum(["raise", "finish_task"], { error: 'must be "raise" or "finish_task" (to cancel, use POST /api/runs/:id/cancel)' }),
    tokens: z.number({ error: "must be a number" }).int("must be a whole number").positive("must be more than 0").max(1e9).optional(),
    costUsd: z.number({ error: "must be a number" }).positive("must be more than 0").max(1e6).optional(),
    minutes: z.number({ error: "must be a number of minutes" }).positive("must be more than 0").max(60 * 24 * 7, "must be at most 10080 minutes (7 days)").optional(),
  })
  .refine((b) => b.action !== "raise" || b.tokens !== undefined || b.costUsd !== undefined || b.minutes !== undefined, {
    message: "raise needs tokens, costUsd or minutes: how much to add to the budget",
    path: ["tokens"],
  });

/** A person's way on at a budget gate: raise it, or let the task in progress finish and stop. */
export async function decideBudget({ user, runId, input }: GateDecision<typeof budgetDecisionSchema>) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      if (gate.kind !== "budget") throw new AppError("conflict:gate", `Gate ${gate.gateNumber} is a ${gate.kind} gate, not a budget gate.`);
      const stage = (gate.context as { stage?: string } | null)?.stage;
      if (input.action === "finish_task" && stage !== "implementation") {
        throw new AppError(
          "conflict:gate",
          `The ${stage ?? "stage"} budget has no task in progress to finish: raise it (action "raise" with tokens, costUsd or minutes) or cancel the run (POST /api/runs/:id/cancel).`,
        );
      }
    },
    claim: {
      status: "approved",
      decision: input.action,
      notes: input.action === "raise" ? describeRaise(input) : "finish the task in progress, then stop",
      payload: { raise: { tokens: input.tokens ?? 0, costUsd: input.costUsd ?? 0, minutes: input.minutes ?? 0 } },
    },
    events: (gate) => [{ type: "APPROVAL_GRANTED", payload: { gateId: gate.id, by: user.id, notes: input.action === "raise" ? "budget raised" : "finish the task, then stop" } }],
  });
}
