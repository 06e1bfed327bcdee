import type { RunState } from "@/lib/workflow";

/**
 * How a finished run ended beyond its status: a completed run either passed validation or was accepted by a person
 * after validation failed (or never ran, when the implementation itself failed). The two must never look alike.
 */
export type RunOutcome = "validated" | "accepted_failed_validation" | "failed" | "cancelled" | null;

export function runOutcome(run: Pick<RunState, "status" | "lastValidation">): RunOutcome {
  if (run.status === "failed" || run.status === "cancelled") return run.status;
  if (run.status !== "completed") return null;
  return run.lastValidation === "passed" ? "validated" : "accepted_failed_validation";
}

/** The words for a run's status badge: "accepted (validation failed)" rather than a plain "completed" when it was. */
export function statusLabel(run: { status: string; outcome?: RunOutcome }): string {
  if (run.status === "completed" && run.outcome === "accepted_failed_validation") return "accepted · validation failed";
  return run.status.replaceAll("_", " ");
}
