import { Inngest } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, type FetchHandler } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { serve } from "inngest/edge";
import { checkpointing, listRuns, startServer, strictOption, waitFor, waitForRuns } from "./harness";

/** Semantics through a real serve endpoint over HTTP; each test's functions live in one app served by one server. */

const calls: Record<string, number> = {};
const hit = (k: string) => (calls[k] = (calls[k] ?? 0) + 1);
const active: Record<string, number> = {};
const maxActive: Record<string, number> = {};
const order: string[] = [];

function buildApp(origin: string) {
  const inngest = new Inngest({ id: "sem", isDev: true, baseUrl: origin });
  const failingChild = inngest.createFunction({ id: "failing-child", retries: 0, triggers: [{ event: "sem/failing-child" }] }, async () => {
    throw new Error("child broke");
  });
  const fns = [
    inngest.createFunction({ id: "memo-retry", retries: 2, triggers: [{ event: "sem/memo-retry" }] }, async ({ step }) => {
      const a = await step.run("a", () => hit("memo-a"));
      const b = await step.run("b", () => {
        if (hit("memo-b") < 3) throw new Error("flaky");
        return "b-ok";
      });
      return { a, b };
    }),
    inngest.createFunction({ id: "sleeper", triggers: [{ event: "sem/sleep" }] }, async ({ event, step }) => {
      const before = await step.run("before", () => hit(`sleep-before-${event.data.k}`));
      await step.sleep("nap", "1s");
      const after = await step.run("after", () => hit(`sleep-after-${event.data.k}`));
      return { before, after };
    }),
    inngest.createFunction({ id: "sleep-until", triggers: [{ event: "sem/sleep-until" }] }, async ({ step }) => {
      await step.sleepUntil("until", new Date(Date.now() + 1000));
      return "woke";
    }),
    inngest.createFunction({ id: "wait-timeout", triggers: [{ event: "sem/wait-timeout" }] }, async ({ step }) => {
      const got = await step.waitForEvent("never", { event: "sem/never", timeout: "1s" });
      return { got };
    }),
    inngest.createFunction({ id: "wait-if", triggers: [{ event: "sem/wait-if" }] }, async ({ event, step }) => {
      const got = await step.waitForEvent("big", {
        event: "sem/amount",
        timeout: "1h",
        if: `async.data.user == event.data.user && async.data.amount > 100`,
      });
      return { amount: got?.data.amount, user: event.data.user };
    }),
    inngest.createFunction(
      { id: "cancellable", cancelOn: [{ event: "sem/cancel", match: "data.id" }], triggers: [{ event: "sem/cancellable" }] },
      async ({ step }) => {
        await step.run("started", () => hit("cancellable-started"));
        await step.sleep("long", "1h");
        await step.run("never", () => hit("cancellable-never"));
      },
    ),
    inngest.createFunction(
      { id: "limited", concurrency: { limit: 1, key: "event.data.group" }, triggers: [{ event: "sem/limited" }] },
      async ({ event, step }) => {
        const key = String(event.data.group);
        const work = (label: string) =>
          step.run(label, async () => {
            active[key] = (active[key] ?? 0) + 1;
            maxActive[key] = Math.max(maxActive[key] ?? 0, active[key]!);
            order.push(`${event.data.n}:${label}`);
            await new Promise((r) => setTimeout(r, 30));
            active[key]! -= 1;
          });
        await work("first");
        await step.sleep("rest", "2s"); // long enough that the other run of the key surely runs its first step meanwhile
        await work("second");
        return event.data.n;
      },
    ),
    inngest.createFunction({ id: "default-retries", triggers: [{ event: "sem/default-retries" }] }, async ({ step }) => {
      await step.run("never-works", () => {
        hit("default-retries");
        throw new Error("still broken");
      });
    }),
    inngest.createFunction({ id: "invoke-failing", triggers: [{ event: "sem/invoke-failing" }] }, async ({ step }) => {
      try {
        await step.invoke("call", { function: failingChild, data: {} });
        return "no error";
      } catch (err) {
        return { invokeError: (err as Error).message };
      }
    }),
    failingChild,
    inngest.createFunction({ id: "idempotent", idempotency: "event.data.key", triggers: [{ event: "sem/idem" }] }, async ({ event }) => event.data.key),
  ];
  return { inngest, functions: fns };
}

let server: Awaited<ReturnType<typeof startServer>>;
let app: ReturnType<typeof buildApp>;
let executor: Executor;
const newExecutor = () => new Executor({ apps: [{ url: server.serveUrl, checkpointing: checkpointing() }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {}, ...strictOption() });

beforeAll(async () => {
  server = await startServer();
  app = buildApp(server.origin);
  server.setHandler(serve({ client: app.inngest, functions: app.functions }) as FetchHandler);
  executor = newExecutor();
  await executor.start();
});
afterAll(async () => {
  await executor?.stop();
  await server?.close();
});

describe("memoization and retries", () => {
  it("a finished step never runs again while a later step is retried", async () => {
    await app.inngest.send({ name: "sem/memo-retry", data: {} });
    const [run] = await waitForRuns("memo-retry");
    expect(run?.output).toEqual({ a: 1, b: "b-ok" });
    expect(calls["memo-a"]).toBe(1);
    expect(calls["memo-b"]).toBe(3);
  });

  it("memoized steps survive an executor restart, and a sleep that fell due while it was down fires on start", async () => {
    await app.inngest.send({ name: "sem/sleep", data: { k: "r1" } });
    await waitFor(async () => (await listRuns("sleeper")).find((r) => r.status === "sleeping"), { what: "run to sleep" });
    await executor.stop();
    // Down for longer than the sleep: the timer is due when the next executor starts.
    await new Promise((r) => setTimeout(r, 1300));
    executor = newExecutor();
    await executor.start();
    const [run] = await waitForRuns("sleeper");
    expect(run?.output).toEqual({ before: 1, after: 1 });
    expect(calls["sleep-before-r1"]).toBe(1);
    const steps = await query<{ n: number }>("SELECT count(*) AS n FROM executor_steps WHERE run_id = ?", [run!.id]);
    expect(Number(steps[0]?.n)).toBe(3);
  });

  it("sleepUntil wakes at the given time", async () => {
    await app.inngest.send({ name: "sem/sleep-until", data: {} });
    const [run] = await waitForRuns("sleep-until");
    expect(run?.output).toBe("woke");
  });
});

describe("retries and invoke errors", () => {
  it("a step is tried 5 times by default (4 retries, as Inngest) before the run fails", async () => {
    await app.inngest.send({ name: "sem/default-retries", data: {} });
    const [run] = await waitForRuns("default-retries");
    expect(run?.status).toBe("failed");
    expect(calls["default-retries"]).toBe(5);
  });

  it("a failed invoked function surfaces as an error in the caller", async () => {
    await app.inngest.send({ name: "sem/invoke-failing", data: {} });
    const [run] = await waitForRuns("invoke-failing");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual({ invokeError: expect.stringContaining("child broke") });
  });
});

describe("waitForEvent", () => {
  it("returns null when the wait times out", async () => {
    await app.inngest.send({ name: "sem/wait-timeout", data: {} });
    const [run] = await waitForRuns("wait-timeout");
    expect(run?.output).toEqual({ got: null });
  });

  it("matches with a CEL `if` over the trigger (event.) and the candidate (async.)", async () => {
    await app.inngest.send({ name: "sem/wait-if", data: { user: "ann" } });
    await waitFor(async () => (await listRuns("wait-if")).find((r) => r.status === "waiting"), { what: "wait" });
    await app.inngest.send([
      { name: "sem/amount", data: { user: "bob", amount: 500 } },
      { name: "sem/amount", data: { user: "ann", amount: 50 } },
      { name: "sem/amount", data: { user: "ann", amount: 150 } },
    ]);
    const [run] = await waitForRuns("wait-if");
    expect(run?.output).toEqual({ amount: 150, user: "ann" });
  });
});

describe("flow control", () => {
  it("cancelOn cancels a matching run and only that run", async () => {
    await app.inngest.send([
      { name: "sem/cancellable", data: { id: "c1" } },
      { name: "sem/cancellable", data: { id: "c2" } },
    ]);
    await waitFor(async () => (await listRuns("cancellable")).filter((r) => r.status === "sleeping").length === 2, { what: "two sleeping runs" });
    await app.inngest.send({ name: "sem/cancel", data: { id: "c1" } });
    const [cancelled] = await waitForRuns("cancellable");
    expect(cancelled?.status).toBe("cancelled");
    expect(cancelled?.event.data.id).toBe("c1");
    const other = (await listRuns("cancellable")).find((r) => r.event.data.id === "c2");
    expect(other?.status).toBe("sleeping");
    expect(calls["cancellable-never"]).toBeUndefined();
  });

  it("concurrency limits executing steps per key, not sleeping runs", async () => {
    await app.inngest.send([
      { name: "sem/limited", data: { group: "g", n: 1 } },
      { name: "sem/limited", data: { group: "g", n: 2 } },
      { name: "sem/limited", data: { group: "h", n: 3 } },
    ]);
    const runs = await waitForRuns("limited", { count: 3 });
    expect(runs.every((r) => r.status === "completed")).toBe(true);
    expect(maxActive.g).toBe(1);
    // Both g-runs did their first step before either did its second: a sleeping run does not hold the slot.
    const firsts = [order.indexOf("1:first"), order.indexOf("2:first")];
    const seconds = [order.indexOf("1:second"), order.indexOf("2:second")];
    expect(Math.max(...firsts)).toBeLessThan(Math.min(...seconds));
  });

  it("idempotency allows one run per key", async () => {
    await app.inngest.send([
      { name: "sem/idem", data: { key: "k1" } },
      { name: "sem/idem", data: { key: "k1" } },
      { name: "sem/idem", data: { key: "k2" } },
    ]);
    const runs = await waitForRuns("idempotent", { count: 2 });
    expect(runs.map((r) => r.output).sort()).toEqual(["k1", "k2"]);
    expect(await listRuns("idempotent")).toHaveLength(2);
  });

  it("an event id is deduplicated", async () => {
    await app.inngest.send({ name: "sem/idem", id: "same-id", data: { key: "d1" } });
    const again = await app.inngest.send({ name: "sem/idem", id: "same-id", data: { key: "d2" } });
    expect(again.ids).toEqual(["same-id"]);
    await waitForRuns("idempotent", { count: 3 });
    const runs = await listRuns("idempotent");
    expect(runs.map((r) => r.output)).not.toContain("d2");
    const stored = await query("SELECT seq FROM executor_events WHERE id = 'same-id'");
    expect(stored).toHaveLength(1);
  });
});
