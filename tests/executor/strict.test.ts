import { Inngest } from "inngest";
import { afterEach, describe, expect, it } from "vitest";
import { parseEnv } from "@/lib/env";
import type { ExecutorOptions } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { checkpointStats } from "@/lib/executor/checkpoint";
import { harness, startApp, waitFor, waitForRuns } from "./harness";

/**
 * Strict "cloud" mode (GATEHOUSE_EXECUTOR_STRICT=cloud, or the Executor's `strict` option): no wait look-back, and
 * Inngest Cloud's limits with Cloud's errors. Each test starts its own app and executor (one at a time: executors on
 * one database drive each other's runs).
 */

type App = Awaited<ReturnType<typeof startApp>>;
let app: App | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A hook called on the call that reports the wait (step `a` is recorded, the wait not stored yet). */
let beforeWaitCall: (() => Promise<void>) | null = null;

function build(id: string) {
  return (origin: string) => {
    const inngest = new Inngest({ id, isDev: true, baseUrl: origin });
    const functions = [
      inngest.createFunction({ id: "between", retries: 0, triggers: [{ event: `${id}/between` }] }, async ({ step }) => {
        await step.run("a", () => 1);
        const got = (await step.waitForEvent("w", { event: `${id}/go`, match: "data.k", timeout: "1500ms" })) as { data: { n: string } } | null;
        return got?.data.n ?? null;
      }),
      inngest.createFunction({ id: "later", retries: 0, triggers: [{ event: `${id}/later` }] }, async ({ step }) => {
        await step.run("a", () => 1);
        const got = (await step.waitForEvent("w", { event: `${id}/go`, match: "data.k", timeout: "20s" })) as { data: { n: string } } | null;
        return got?.data.n ?? null;
      }),
      inngest.createFunction({ id: "big-output", retries: 0, triggers: [{ event: `${id}/big-output` }] }, async ({ event, step }) => {
        return step.run("big", () => "x".repeat(Number(event.data.size)));
      }),
      inngest.createFunction({ id: "growing", retries: 0, triggers: [{ event: `${id}/growing` }] }, async ({ step }) => {
        for (let i = 0; i < 5; i++) await step.run(`s${i}`, () => "y".repeat(2000));
        return "done";
      }),
      inngest.createFunction({ id: "steps", retries: 0, triggers: [{ event: `${id}/steps` }] }, async ({ event, step }) => {
        let sum = 0;
        for (let i = 0; i < Number(event.data.n); i++) sum += await step.run(`s${i}`, () => 1);
        return sum;
      }),
      inngest.createFunction({ id: "slow", retries: 1, triggers: [{ event: `${id}/slow` }] }, async ({ event, step }) => {
        return step.run("sleepy", async () => {
          await new Promise((r) => setTimeout(r, Number(event.data.ms)));
          return "finished";
        });
      }),
    ];
    return { inngest, functions };
  };
}

async function start(id: string, options: Partial<ExecutorOptions>): Promise<App> {
  app = await startApp(build(id), options);
  // The hook runs inside the app's serve handler, before the SDK answers the call that reports the wait.
  const { server } = app;
  const inner = (await import("inngest/edge")).serve({ client: app.inngest, functions: app.functions }) as (r: Request) => Promise<Response>;
  server.setHandler(async (request) => {
    if (beforeWaitCall && request.method === "POST") {
      const body = (await request.clone().json()) as { steps?: Record<string, unknown> };
      if (Object.keys(body.steps ?? {}).length === 1) {
        const hook = beforeWaitCall;
        beforeWaitCall = null;
        await hook();
      }
    }
    return inner(request);
  });
  return app;
}

const runOf = async (id: string, fn: string) => (await waitForRuns(fn, { where: (r) => r.fn_id === `${id}-${fn}` }))[0]!;

async function waitStored(fnId: string): Promise<void> {
  await waitFor(
    async () => {
      const [row] = await query<{ n: number }>(
        "SELECT count(*) AS n FROM executor_pending WHERE kind = 'wait' AND run_id IN (SELECT id FROM executor_runs WHERE fn_id = ?)",
        [fnId],
      );
      return Number(row?.n) > 0;
    },
    { what: `the wait of ${fnId} to be stored` },
  );
}

describe("wait look-back", () => {
  it("without strict mode, an event sent after the step before the wait and before the wait is stored is caught", async () => {
    const a = await start("lb-loose", { strict: null });
    beforeWaitCall = async () => void (await a.send({ name: "lb-loose/go", data: { k: "1", n: "in-between" } }));
    await a.send({ name: "lb-loose/between", data: { k: "1" } });
    expect((await runOf("lb-loose", "between")).output).toBe("in-between");
    expect(beforeWaitCall).toBeNull();
  });

  it("in strict mode the same event is not caught (no look-back, as on Inngest Cloud): the wait times out", async () => {
    const a = await start("lb-strict", { strict: "cloud" });
    beforeWaitCall = async () => void (await a.send({ name: "lb-strict/go", data: { k: "1", n: "in-between" } }));
    await a.send({ name: "lb-strict/between", data: { k: "1" } });
    const run = await runOf("lb-strict", "between");
    expect(run.status).toBe("completed");
    expect(run.output).toBeNull();
    expect(beforeWaitCall).toBeNull();
  });

  it("in strict mode an event sent after the wait is stored is caught", async () => {
    const a = await start("lb-later", { strict: "cloud" });
    await a.send({ name: "lb-later/later", data: { k: "2" } });
    await waitStored("lb-later-later");
    await a.send({ name: "lb-later/go", data: { k: "2", n: "after-wait" } });
    expect((await runOf("lb-later", "later")).output).toBe("after-wait");
  });
});

describe("Cloud's limits with Cloud's errors", () => {
  it("a step output over 4 MB fails the run with Inngest's error; one under it passes (classic 206 path)", async () => {
    const a = await start("lim-out", { strict: "cloud" });
    await a.send({ name: "lim-out/big-output", data: { size: 4 * 1024 * 1024 + 10 } });
    const failed = await runOf("lim-out", "big-output");
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatchObject({ name: "InngestErrStepOutputTooLarge", message: "step output size is greater than the limit", step: "big" });
    await a.send({ name: "lim-out/big-output", data: { size: 1000 } });
    const [, ok] = await waitForRuns("big-output", { count: 2 });
    expect(ok?.status).toBe("completed");
  });

  it("the same on the checkpoint path: a checkpointed step output over 4 MB fails the run with Inngest's error", async () => {
    harness.mode = "checkpointed";
    try {
      const a = await start("lim-out-cp", { strict: "cloud" });
      const stored = checkpointStats.stored;
      await a.send({ name: "lim-out-cp/big-output", data: { size: 1000 } });
      expect(await runOf("lim-out-cp", "big-output")).toMatchObject({ status: "completed" });
      expect(checkpointStats.stored).toBeGreaterThan(stored);
      await a.send({ name: "lim-out-cp/big-output", data: { size: 4 * 1024 * 1024 + 10 } });
      const runs = await waitForRuns("big-output", { count: 2, where: (r) => r.fn_id === "lim-out-cp-big-output" });
      const failed = runs.find((r) => r.status === "failed");
      expect(failed?.error).toMatchObject({ name: "InngestErrStepOutputTooLarge", message: "step output size is greater than the limit" });
    } finally {
      harness.mode = "classic";
    }
  });

  it("run state past the limit fails the run with InngestErrStateOverflowed", async () => {
    const a = await start("lim-state", { strict: "cloud", limits: { maxRunStateBytes: 5000 } });
    await a.send({ name: "lim-state/growing", data: {} });
    const run = await runOf("lim-state", "growing");
    expect(run.status).toBe("failed");
    expect(run.error).toEqual({
      name: "InngestErrStateOverflowed",
      message: "The function run exceeded the state size limit of 5000 bytes.",
      error: "InngestErrStateOverflowed: The function run exceeded the state size limit of 5000 bytes.",
    });
    // Two steps of ~2 kB fit, the third would not: nothing of it was stored.
    const [row] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_steps WHERE run_id = ?", [run.id]);
    expect(Number(row?.n)).toBe(2);
  });

  it("a run past the step limit fails with InngestErrFunctionOverflowed; one within it completes", async () => {
    const a = await start("lim-steps", { strict: "cloud", limits: { maxSteps: 3 } });
    await a.send({ name: "lim-steps/steps", data: { n: 5 } });
    const over = await runOf("lim-steps", "steps");
    expect(over.status).toBe("failed");
    expect(over.error).toMatchObject({ name: "InngestErrFunctionOverflowed", message: "The function run exceeded the step limit of 3 steps." });
    const [row] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_steps WHERE run_id = ?", [over.id]);
    expect(Number(row?.n)).toBe(3);
    await a.send({ name: "lim-steps/steps", data: { n: 2 } });
    const runs = await waitForRuns("steps", { count: 2 });
    expect(runs.find((r) => r.id !== over.id)).toMatchObject({ status: "completed", output: 2 });
  });

  it("the step limit is off without strict mode", async () => {
    const a = await start("lim-steps-off", { strict: null, limits: { maxSteps: 3 } });
    await a.send({ name: "lim-steps-off/steps", data: { n: 5 } });
    expect(await runOf("lim-steps-off", "steps")).toMatchObject({ status: "completed", output: 5 });
  });

  it("an event over the size limit is refused with 413 and not stored; one within it is accepted", async () => {
    const a = await start("lim-event", { strict: "cloud", limits: { maxEventBytes: 1000 } });
    const post = (data: unknown) =>
      fetch(`${a.server.origin}/e/key`, { method: "POST", body: JSON.stringify(data), headers: { "content-type": "application/json" } });
    const big = await post({ name: "lim-event/none", id: "too-big", data: { blob: "z".repeat(2000) } });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: string }).error).toMatch(/event payload is too large: \d+ bytes, over the limit of 1000 bytes/);
    expect(await query("SELECT id FROM executor_events WHERE id = 'too-big'")).toHaveLength(0);
    const small = await post({ name: "lim-event/none", id: "fits", data: { blob: "z".repeat(500) } });
    expect(small.status).toBe(200);
    expect(await query("SELECT id FROM executor_events WHERE id = 'fits'")).toHaveLength(1);
  });

  it("without strict mode events are not held to Cloud's size limit", async () => {
    const a = await start("lim-event-off", { strict: null, limits: { maxEventBytes: 1000 } });
    const res = await fetch(`${a.server.origin}/e/key`, {
      method: "POST",
      body: JSON.stringify({ name: "lim-event-off/none", data: { blob: "z".repeat(2000) } }),
    });
    expect(res.status).toBe(200);
  });

  it("the event size limit is configurable up to 3 MiB, not beyond", () => {
    expect(parseEnv({ NODE_ENV: "test" }).GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES).toBe(256 * 1024);
    expect(parseEnv({ NODE_ENV: "test", GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES: String(3 * 1024 * 1024) }).GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES).toBe(3 * 1024 * 1024);
    expect(() => parseEnv({ NODE_ENV: "test", GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES: String(3 * 1024 * 1024 + 1) })).toThrow(/at most 3145728/);
    expect(parseEnv({ NODE_ENV: "test", GATEHOUSE_EXECUTOR_STRICT: "cloud" }).GATEHOUSE_EXECUTOR_STRICT).toBe("cloud");
    expect(parseEnv({ NODE_ENV: "test" }).GATEHOUSE_EXECUTOR_STRICT).toBeNull();
    expect(() => parseEnv({ NODE_ENV: "test", GATEHOUSE_EXECUTOR_STRICT: "yes" })).toThrow(/cloud or off/);
  });
});

describe("step duration limit", () => {
  it("a call longer than the configured limit fails that attempt like a host timeout; the retry fails too and so does the run", async () => {
    const a = await start("dur", { strict: "cloud", limits: { maxStepDurationMs: 300 } });
    await a.send({ name: "dur/slow", data: { ms: 1500 } });
    const run = await runOf("dur", "slow");
    expect(run.status).toBe("failed");
    expect((run.error as { message: string }).message).toMatch(/timed out after 300 ms: over the step duration limit of 0.3 s \(GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS\)/);
  });

  it("a call within the limit completes", async () => {
    const a = await start("dur-ok", { strict: "cloud", limits: { maxStepDurationMs: 5000 } });
    await a.send({ name: "dur-ok/slow", data: { ms: 20 } });
    expect(await runOf("dur-ok", "slow")).toMatchObject({ status: "completed", output: "finished" });
  });
});
