import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, handleEventRequest, sendEvents, type FetchHandler } from "@/lib/executor";
import { checkpointingFetch, checkpointStats } from "@/lib/executor/checkpoint";
import { harness, strictOption, waitForRuns } from "./harness";

/**
 * In strict "cloud" mode (wait-window.strict.test.ts, or GATEHOUSE_EXECUTOR_STRICT=cloud) there is no look-back, as on
 * Inngest Cloud: each case asserts that instead — only events ingested after the wait is stored match.
 */
const strict = harness.strict;

/**
 * The look-back window of a wait, defined by the run's own step history (README, "Waits and early events"): a wait
 * matches events ingested after the run began the step before it (or resumed, or was triggered), whether they arrive
 * before the wait is stored or after, and whatever the transport (classic calls or checkpoints).
 */

const MODES = ["classic", "checkpointed"] as const;
type Mode = (typeof MODES)[number];

/** Per mode: a hook the test sets to send an event after step `a` is recorded and before the wait is reported. */
const afterA: Record<Mode, (() => Promise<void>) | null> = { classic: null, checkpointed: null };

function build(mode: Mode) {
  const origin = `http://ww-${mode}.local`;
  const checkpoints = checkpointingFetch(async (input, init) => handleEventRequest(new Request(input, init)));
  const inngest = new Inngest({
    id: `ww-${mode}`,
    isDev: true,
    baseUrl: origin,
    fetch: async (input, init) => {
      const response = await checkpoints(input, init);
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      // Checkpointed: step a's result is stored once its checkpoint call returns; the wait is reported after.
      if (url.includes("/v1/checkpoint/") && afterA[mode]) {
        const hook = afterA[mode]!;
        afterA[mode] = null;
        await hook();
      }
      return response;
    },
  });
  const go = (k: string, n: string) => inngest.send({ name: `ww/go-${mode}`, data: { k, n } });
  const wait = (step: { waitForEvent: (id: string, o: { event: string; match: string; timeout: string }) => Promise<unknown> }, timeout = "3s") =>
    step.waitForEvent("w", { event: `ww/go-${mode}`, match: "data.k", timeout }) as Promise<{ data: { n: string } } | null>;
  const functions = [
    inngest.createFunction({ id: "boundary", retries: 0, triggers: [{ event: `ww/boundary-${mode}` }] }, async ({ event, step }) => {
      await step.run("zero", () => go(event.data.k, "during-zero"));
      await step.run("a", () => go(event.data.k, "during-a"));
      return (await wait(step))?.data.n ?? null;
    }),
    inngest.createFunction({ id: "between", retries: 0, triggers: [{ event: `ww/between-${mode}` }] }, async ({ step }) => {
      await step.run("a", () => 1);
      return (await wait(step))?.data.n ?? null;
    }),
    inngest.createFunction({ id: "stale", retries: 0, triggers: [{ event: `ww/stale-${mode}` }] }, async ({ event, step }) => {
      await step.run("zero", () => go(event.data.k, "too-early"));
      await step.run("a", () => 1);
      return (await wait(step, "1s"))?.data.n ?? null;
    }),
    inngest.createFunction({ id: "first", retries: 0, triggers: [{ event: `ww/first-${mode}` }] }, async ({ step }) => {
      return (await wait(step))?.data.n ?? null;
    }),
    inngest.createFunction({ id: "two-waits", retries: 0, triggers: [{ event: `ww/two-waits-${mode}` }] }, async ({ event, step }) => {
      const first = await wait(step);
      await step.run("between", () => 1);
      const second = (await step.waitForEvent("w2", { event: `ww/go-${mode}`, match: "data.k", timeout: "3s" })) as { data: { n: string } } | null;
      return [first?.data.n ?? null, second?.data.n ?? null, event.data.k];
    }),
    inngest.createFunction({ id: "later", retries: 0, triggers: [{ event: `ww/later-${mode}` }] }, async ({ step }) => {
      await step.run("a", () => 1);
      return (await wait(step, "20s"))?.data.n ?? null;
    }),
  ];
  const sdk = serve({ client: inngest, functions }) as FetchHandler;
  const handler: FetchHandler = async (request) => {
    // Classic: step a's result was stored from the previous call's 206; this call is the one that reports the wait.
    if (mode === "classic" && afterA.classic && request.method === "POST") {
      const body = (await request.clone().json()) as { steps?: Record<string, unknown> };
      if (Object.keys(body.steps ?? {}).length === 1) {
        const hook = afterA.classic;
        afterA.classic = null;
        await hook();
      }
    }
    return sdk(request);
  };
  return { target: { url: `${origin}/api/inngest`, handler, checkpointing: mode === "checkpointed" } };
}

let executor: Executor;
beforeAll(async () => {
  executor = new Executor({ apps: MODES.map((mode) => build(mode).target), pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {}, ...strictOption() });
  await executor.start();
});
afterAll(async () => {
  await executor?.stop();
});

const runOf = async (fn: string, mode: Mode) => {
  const [run] = await waitForRuns(fn, { where: (r) => r.fn_id === `ww-${mode}-${fn}` });
  expect(run?.error).toBeNull();
  return run;
};

describe.each(MODES)("the wait look-back window (%s)", (mode) => {
  it("opens when the run began the step before the wait: an event that step caused matches, one from the step before it does not", async () => {
    await sendEvents({ name: `ww/boundary-${mode}`, data: { k: `b-${mode}` } });
    // Strict: both events came before the wait was stored, so neither matches.
    expect((await runOf("boundary", mode))?.output).toBe(strict ? null : "during-a");
  });

  it("an event arriving after that step was recorded but before the wait is stored matches", async () => {
    afterA[mode] = async () => {
      await sendEvents({ name: `ww/go-${mode}`, data: { k: `x-${mode}`, n: "in-between" } });
    };
    await sendEvents({ name: `ww/between-${mode}`, data: { k: `x-${mode}` } });
    expect((await runOf("between", mode))?.output).toBe(strict ? null : "in-between");
    expect(afterA[mode]).toBeNull();
  });

  it("an event from before the window does not match: the wait times out", async () => {
    await sendEvents({ name: `ww/stale-${mode}`, data: { k: `s-${mode}` } });
    expect((await runOf("stale", mode))?.output).toBeNull();
  });

  it("with no step before the wait, the window opens at the triggering event", async () => {
    await sendEvents([
      { name: `ww/go-${mode}`, data: { k: `f-${mode}`, n: "before-trigger" } },
      { name: `ww/first-${mode}`, data: { k: `f-${mode}` } },
      { name: `ww/go-${mode}`, data: { k: `f-${mode}`, n: "after-trigger" } },
    ]);
    // Strict: "after-trigger" is ingested with the trigger, before the run has even started: too early.
    expect((await runOf("first", mode))?.output).toBe(strict ? null : "after-trigger");
  });

  it("two early events meet two waits in order: the second wait looks back from where the first one matched", async () => {
    const k = `t-${mode}`;
    await sendEvents([
      { name: `ww/two-waits-${mode}`, data: { k } },
      { name: `ww/go-${mode}`, data: { k, n: "one" } },
      { name: `ww/go-${mode}`, data: { k, n: "two" } },
    ]);
    expect((await runOf("two-waits", mode))?.output).toEqual(strict ? [null, null, k] : ["one", "two", k]);
    if (mode === "checkpointed") expect(checkpointStats.stored).toBeGreaterThan(0);
  });

  it("an event arriving after the wait is stored matches", async () => {
    await sendEvents({ name: `ww/later-${mode}`, data: { k: `l-${mode}` } });
    const { query } = await import("@/lib/executor/store");
    for (let i = 0; i < 400; i++) {
      const [row] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_pending WHERE kind = 'wait' AND run_id IN (SELECT id FROM executor_runs WHERE fn_id = ?)", [`ww-${mode}-later`]);
      if (Number(row?.n) > 0) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await sendEvents({ name: `ww/go-${mode}`, data: { k: `l-${mode}`, n: "after-wait" } });
    expect((await runOf("later", mode))?.output).toBe("after-wait");
  });
});
