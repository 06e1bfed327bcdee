import { healthCheck } from "./functions/health-check";
import { runWorkflow } from "./functions/run-workflow";

/** Every Inngest function Gatehouse serves at /api/inngest. Add new functions here. */
export const functions = [healthCheck, runWorkflow];

export { inngest } from "./client";
