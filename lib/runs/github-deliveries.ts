import { handleDelivery as handleWith, type DeliveryOutcome } from "@/lib/github/handlers";
import { startRun } from "./service";

/**
 * Handle a stored GitHub webhook delivery (the github-webhook function's step), with the run service wired in: a
 * /gatehouse comment or a review asking for changes starts a run through startRun, like POST /api/runs.
 */
export function handleDelivery({ deliveryId }: { deliveryId: string }): Promise<DeliveryOutcome> {
  return handleWith({ deliveryId, startRun });
}
