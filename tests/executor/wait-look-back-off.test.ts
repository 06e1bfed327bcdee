import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, handleEventRequest, sendEvents, type FetchHandler } from "@/lib/executor";
import { waitStats } from "@/lib/executor/events";
import { query } from "@/lib/executor/store";
import { waitForRuns } from "./harness";

/**
 * `waitLookBack: false` (Inngest's semantics, inngest/inngest#1433): a wait matches only events ingested after it was
 * stored. The same "between" case that wait-window.test.ts shows matching with look-back on misses here.
 */

/** A hook the test sets to send an event after step `a` is recorded and before the wait is reported. */
let afterA: (() => Promise<void>) | null = null;

const origin = "http://wlb-off.local";
const inngest = new Inngest({ id: "wlb-off", isDev: true, baseUrl: origin, fetch: async (input, init) => handleEventRequest(new Request(input, init)) });
const wait = (step: { waitForEvent: (id: string, o: { event: string; match: string; timeout: string }) => Promise<unknown> }, timeout: string) =>
  step.waitForEvent("w", { event: "wlb/go", match: "data.k", timeout }) as Promise<{ data: { n: string } } | null>;
const functions = [
  inngest.createFunction({ id: "between", retries: 0, triggers: [{ event: "wlb/between" }] }, async ({ step }) => {
    await step.run("a", () => 1);
    return (await wait(step, "1s"))?.data.n ?? null;
  }),
  inngest.createFunction({ id: "later", retries: 0, triggers: [{ event: "wlb/later" }] }, async ({ step }) => {
    await step.run("a", () => 1);
    return (await wait(step, "20s"))?.data.n ?? null;
  }),
];
const sdk = serve({ client: inngest, functions }) as FetchHandler;
const handler: FetchHandler = async (request) => {
  // Step a's result was stored from the previous call's 206; this call is the one that reports the wait.
  if (afterA && request.method === "POST") {
    const body = (await request.clone().json()) as { steps?: Record<string, unknown> };
    if (Object.keys(body.steps ?? {}).length === 1) {
      const hook = afterA;
      afterA = null;
      await hook();
    }
  }
  return sdk(request);
};

let executor: Executor;
beforeAll(async () => {
  executor = new Executor({ apps: [{ url: `${origin}/api/inngest`, handler }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {}, waitLookBack: false });
  await executor.start();
});
afterAll(async () => {
  await executor?.stop();
});

const outputOf = async (fn: string) => {
  const [run] = await waitForRuns(fn, { where: (r) => r.fn_id === `wlb-off-${fn}` });
  expect(run?.error).toBeNull();
  return run?.output;
};

describe("waits without look-back", () => {
  it("an event arriving after the step before the wait but before the wait is stored does not match: the wait times out", async () => {
    const fromHistory = waitStats.fromHistory;
    afterA = async () => {
      await sendEvents({ name: "wlb/go", data: { k: "x", n: "in-between" } });
    };
    await sendEvents({ name: "wlb/between", data: { k: "x" } });
    expect(await outputOf("between")).toBeNull();
    expect(afterA).toBeNull();
    expect(waitStats.fromHistory).toBe(fromHistory);
  });

  it("an event arriving after the wait is stored matches", async () => {
    await sendEvents({ name: "wlb/later", data: { k: "l" } });
    for (let i = 0; i < 400; i++) {
      const [row] = await query<{ n: number }>(
        "SELECT count(*) AS n FROM executor_pending WHERE kind = 'wait' AND run_id IN (SELECT id FROM executor_runs WHERE fn_id = ?)",
        ["wlb-off-later"],
      );
      if (Number(row?.n) > 0) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await sendEvents({ name: "wlb/go", data: { k: "l", n: "after-wait" } });
    expect(await outputOf("later")).toBe("after-wait");
  });
});
