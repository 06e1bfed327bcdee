import { inngest } from "../client";

/** A no-op function: proves the executor (embedded or Inngest) reaches this app. Send `gatehouse/health.ping`. */
export const healthCheck = inngest.createFunction(
  { id: "health-check", triggers: [{ event: "gatehouse/health.ping" }] },
  async ({ event, step }) => {
    const pong = await step.run("pong", () => ({ at: new Date().toISOString() }));
    return { ok: true, ping: event.data ?? null, pong };
  },
);
