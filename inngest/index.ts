import { healthCheck } from "./functions/health-check";
import { githubWebhook } from "./functions/github-webhook";
import { decisionReannounce } from "./functions/decision-reannounce";
import { notifyDecision, notifyRedeliver } from "./functions/notify-decision";
import { runCancelledCleanup, runMerge, runWorkflow } from "./functions/run-workflow";

/** Every Inngest function Gatehouse serves at /api/inngest. Add new functions here. */
export const functions = [healthCheck, runWorkflow, runCancelledCleanup, runMerge, githubWebhook, decisionReannounce, notifyDecision, notifyRedeliver];

export { inngest } from "./client";
