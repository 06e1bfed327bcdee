import { RunEndedError } from "@/lib/runs/steps/context";
import type { ImplementerState } from "@/lib/agents";
import type { RunFlow } from "./flow";
import { replan, type Plans } from "./plan";
import { gate } from "./waits";

/*
 * An implementer that stopped — looping, stopping with todos open, or out of turns, after a nudge and a firm reminder
 * (lib/agents/intervention.ts) — is not retried blindly, whatever trustMode.fixes says: a person decides at a fix gate
 * about it (its context has `stuck`): retry with a note (a new session, told the note), send the run back to planning
 * (a re-plan through the plan gate), or cancel the run. IMPLEMENTATION_FAILED is recorded already.
 */

const REASONS = ["loop", "no_progress", "iteration_limit"] as const;

export async function decideStuck(
  flow: RunFlow,
  plans: Plans,
  { attempt, failure, state }: { attempt: number; failure: string; state: ImplementerState },
): Promise<{ accepted: true } | { accepted: false; feedback: string }> {
  const reason = REASONS.find((r) => failure.includes(`${r}:`)) ?? null;
  const key = `stuck-gate:${attempt}`;
  const decision = await gate(flow, key, "fix", {
    report: `The implementer stopped and asks a person how to go on: ${failure}`,
    // The inbox's line for it (lib/runs/inbox.ts).
    summary: `The implementer stopped${reason ? ` (${reason.replace("_", " ")})` : ""}: retry with a note, re-plan or cancel`,
    score: null,
    findings: [],
    attempt,
    stuck: {
      reason,
      message: failure,
      todos: state.todos.map(({ id, title, status }) => ({ id, title, status })),
      interventions: state.interventions ?? [],
    },
    choices: {
      retry: "Retry: a new implementer session, told your note",
      replan: "Back to planning: a new plan, through the plan gate",
      cancel: "Cancel the run",
    },
  });
  if (decision.decision === "cancel") throw new RunEndedError("cancelled");
  const stopped = `The previous implementer session stopped before finishing (${failure}). Start again, keep to the todos in order, and mark each done when it is finished.`;
  const note = decision.notes ? `\n\nA person's note: ${decision.notes}` : "";
  // Only a declared deadline default can accept here (a person's accept is refused): what is there goes on as it is.
  if (decision.decision === "accept") return { accepted: true };
  if (decision.decision === "replan") {
    // A person's choice: not counted in limits.maxReplans.
    const replanned = await replan(flow, plans, `${key}:replan`, `A person sent the run back to planning after the implementer stopped: ${failure}${note}`, {
      counted: false,
    });
    if (replanned.plan) plans.approved = replanned.plan;
    const outcome = replanned.plan
      ? "The run was re-planned: implement the new plan."
      : `The re-plan was not taken (${replanned.notes ?? "rejected"}): implement the approved plan.`;
    return { accepted: false, feedback: `${stopped}\n\n${outcome}${note}` };
  }
  return { accepted: false, feedback: `${stopped}${note}` };
}
