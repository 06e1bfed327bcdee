import { healthCheck } from "./functions/health-check";
import { githubWebhook } from "./functions/github-webhook";
import { decisionReannounce } from "./functions/decision-reannounce";
import { notifyDecision } from "./functions/notify-decision";
import { notifyRedeliver } from "./functions/notify-redeliver";
import { notifyRun } from "./functions/notify-run";
import { runWorkflow } from "./functions/run-workflow";
import { runCancelledCleanup } from "./functions/run-cancelled-cleanup";
import { runMerge } from "./functions/run-merge";

/** Every Inngest function Gatehouse serves at /api/inngest. Add new functions here. */
export const functions = [healthCheck, runWorkflow, runCancelledCleanup, runMerge, githubWebhook, decisionReannounce, notifyDecision, notifyRedeliver, notifyRun];

export { inngest } from "./client";
