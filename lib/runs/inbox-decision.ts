/*
 * What was decided on a done inbox item, in words, from the gate's or question's own row: "Approved", "Rejected",
 * "Answered: French", "Skipped", "Not decided: the run was cancelled". Two rows of the same gate kind then read apart.
 */

const FIX: Record<string, string> = { retry: "Retry the fixes", accept: "Accepted as it is", cancel: "Cancel the run", replan: "Sent back to planning" };
const BUDGET: Record<string, string> = { raise: "Budget raised", finish_task: "Finish the task, then stop" };

function answerText(response: unknown): string {
  if (typeof response === "string") return response.length > 80 ? `${response.slice(0, 79)}…` : response;
  if (Array.isArray(response)) return response.map(String).join(", ");
  if (response && typeof response === "object" && "fileName" in response) return `file ${String((response as { fileName: unknown }).fileName)}`;
  return "given";
}

export function inboxDecision({
  kind,
  gateKind,
  status,
  decision,
  response,
  runStatus,
}: {
  kind: "gate" | "question";
  gateKind: string | null;
  status: string;
  decision: string | null;
  response: unknown;
  runStatus: string;
}): string | null {
  if (status === "pending") return ["completed", "failed", "cancelled"].includes(runStatus) ? `Not decided: the run ${runStatus === "completed" ? "completed" : `was ${runStatus}`}` : null;
  if (status === "cancelled") return "Cancelled with the run";
  if (kind === "question") {
    if (status === "answered") return `Answered: ${answerText(response)}`;
    if (status === "ignored") return "Skipped: the run went on with its best judgement";
    return status.replaceAll("_", " ");
  }
  if (gateKind === "fix" && decision && FIX[decision]) return FIX[decision]!;
  if (gateKind === "budget" && decision && BUDGET[decision]) return BUDGET[decision]!;
  if (status === "approved") return "Approved";
  if (status === "rejected") return "Rejected: sent back to the planner";
  if (status === "asked") return "Asked the planner a question";
  return status.replaceAll("_", " ");
}
