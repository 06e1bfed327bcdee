import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, type FetchHandler } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { checkpointing, listRuns, startServer, waitFor, waitForRuns } from "./harness";

/**
 * Flow control with Inngest's documented semantics, counted: how many runs three (or more) events start, with which
 * events, in which order, and when. One app, served over HTTP, driven by one executor.
 */

const started: Record<string, { n: unknown; at: number }[]> = {};
const mark = (fn: string, n: unknown) => (started[fn] ??= []).push({ n, at: Date.now() });
const active: Record<string, number> = {};
const maxActive: Record<string, number> = {};
const enter = (k: string) => {
  active[k] = (active[k] ?? 0) + 1;
  maxActive[k] = Math.max(maxActive[k] ?? 0, active[k]!);
};
const leave = (k: string) => (active[k]! -= 1);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function buildApp(origin: string) {
  const inngest = new Inngest({ id: "flow", isDev: true, baseUrl: origin });
  const fns = [
    inngest.createFunction({ id: "rate", rateLimit: { limit: 1, period: "5s" }, triggers: [{ event: "flow/rate" }] }, async ({ event }) => event.data.n),
    inngest.createFunction(
      { id: "rate-keyed", rateLimit: { limit: 1, period: "1m", key: "event.data.user" }, triggers: [{ event: "flow/rate-keyed" }] },
      async ({ event }) => event.data.user,
    ),
    inngest.createFunction({ id: "throttle", throttle: { limit: 1, period: "1s" }, triggers: [{ event: "flow/throttle" }] }, async ({ event, step }) => {
      await step.run("start", () => mark("throttle", event.data.n));
      return event.data.n;
    }),
    inngest.createFunction(
      { id: "throttle-burst", throttle: { limit: 1, period: "1m", burst: 2, key: "event.data.k" }, triggers: [{ event: "flow/throttle-burst" }] },
      async ({ event }) => event.data.n,
    ),
    inngest.createFunction({ id: "debounce", debounce: { period: "1s" }, triggers: [{ event: "flow/debounce" }] }, async ({ event, events }) => ({
      n: event.data.n,
      count: events.length,
    })),
    inngest.createFunction(
      { id: "debounce-timeout", debounce: { period: "1m", timeout: "1s", key: "event.data.k" }, triggers: [{ event: "flow/debounce-timeout" }] },
      async ({ event }) => event.data.n,
    ),
    inngest.createFunction(
      { id: "throttle-restart", throttle: { limit: 1, period: "1s" }, triggers: [{ event: "flow/throttle-restart" }] },
      async ({ event }) => event.data.n,
    ),
    inngest.createFunction({ id: "debounce-restart", debounce: { period: "1s" }, triggers: [{ event: "flow/debounce-restart" }] }, async ({ event }) => event.data.n),
    inngest.createFunction({ id: "batch", batchEvents: { maxSize: 3, timeout: "60s" }, triggers: [{ event: "flow/batch" }] }, async ({ events }) =>
      events.map((e) => e.data.n),
    ),
    inngest.createFunction(
      { id: "batch-keyed", batchEvents: { maxSize: 2, timeout: "1s", key: "event.data.k" }, triggers: [{ event: "flow/batch-keyed" }] },
      async ({ events }) => events.map((e) => `${e.data.k}${e.data.n}`),
    ),
    inngest.createFunction(
      {
        id: "two-keys",
        concurrency: [
          { limit: 1, key: "event.data.a" },
          { limit: 1, key: "event.data.b" },
        ],
        triggers: [{ event: "flow/two-keys" }],
      },
      async ({ event, step }) => {
        await step.run("work", async () => {
          enter(`a${event.data.a}`);
          enter(`b${event.data.b}`);
          await pause(150);
          leave(`a${event.data.a}`);
          leave(`b${event.data.b}`);
        });
      },
    ),
    ...["env-one", "env-two"].map((id) =>
      inngest.createFunction({ id, concurrency: { limit: 1, key: '"shared-api"', scope: "env" }, triggers: [{ event: "flow/env" }] }, async ({ step }) => {
        await step.run("work", async () => {
          enter("env");
          await pause(150);
          leave("env");
        });
      }),
    ),
    inngest.createFunction(
      { id: "priority", concurrency: 1, priority: { run: "event.data.p" }, triggers: [{ event: "flow/priority" }] },
      async ({ event, step }) => {
        await step.run("work", async () => {
          mark("priority", event.data.n);
          if (event.data.n === "blocker") await pause(600);
        });
      },
    ),
    inngest.createFunction({ id: "single-skip", singleton: { mode: "skip" }, triggers: [{ event: "flow/single-skip" }] }, async ({ event, step }) => {
      await step.sleep("hold", "1s");
      return event.data.n;
    }),
    inngest.createFunction(
      { id: "single-cancel", singleton: { mode: "cancel", key: "event.data.k" }, triggers: [{ event: "flow/single-cancel" }] },
      async ({ event, step }) => {
        await step.run("begin", () => mark("single-cancel", event.data.n));
        await step.sleep("hold", "1s");
        return event.data.n;
      },
    ),
    inngest.createFunction(
      { id: "start-timeout", concurrency: 1, timeouts: { start: "1s" }, triggers: [{ event: "flow/start-timeout" }] },
      async ({ event, step }) => {
        await step.run("work", async () => {
          mark("start-timeout", event.data.n);
          if (event.data.n === "blocker") await pause(2500);
        });
        return event.data.n;
      },
    ),
    inngest.createFunction({ id: "finish-timeout", timeouts: { finish: "1s" }, triggers: [{ event: "flow/finish-timeout" }] }, async ({ step }) => {
      await step.run("begin", () => mark("finish-timeout", "begin"));
      await step.sleep("long", "3s");
      await step.run("end", () => mark("finish-timeout", "end"));
    }),
    inngest.createFunction(
      { id: "cancel-window", cancelOn: [{ event: "flow/cancel-window.stop", timeout: "1s" }], triggers: [{ event: "flow/cancel-window" }] },
      async ({ event, step }) => {
        await step.sleep("hold", "2s");
        return event.data.n;
      },
    ),
    inngest.createFunction({ id: "finisher", triggers: [{ event: "flow/finisher" }] }, async () => 42),
    inngest.createFunction(
      { id: "on-finished", triggers: [{ event: "inngest/function.finished", if: "event.data.function_id == 'flow-finisher'" }] },
      async ({ event }) => ({ result: event.data.result, trigger: event.data.event.name }),
    ),
    inngest.createFunction(
      { id: "on-cancelled", triggers: [{ event: "inngest/function.cancelled", if: "event.data.function_id == 'flow-finish-timeout'" }] },
      async ({ event }) => ({ message: (event.data.error as { message: string }).message, run: event.data.run_id }),
    ),
    inngest.createFunction({ id: "breaker", retries: 0, triggers: [{ event: "flow/breaker" }] }, async () => {
      throw new Error("broke on purpose");
    }),
    inngest.createFunction(
      { id: "on-failed", triggers: [{ event: "inngest/function.failed", if: "event.data.function_id == 'flow-breaker'" }] },
      async ({ event }) => (event.data.error as { message: string }).message,
    ),
  ];
  return { inngest, functions: fns };
}

let server: Awaited<ReturnType<typeof startServer>>;
let app: ReturnType<typeof buildApp>;
let executor: Executor;

beforeAll(async () => {
  server = await startServer();
  app = buildApp(server.origin);
  server.setHandler(serve({ client: app.inngest, functions: app.functions }) as FetchHandler);
  executor = new Executor({ apps: [{ url: server.serveUrl, checkpointing: checkpointing() }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {} });
  await executor.start();
  const [status] = (await executor.status()).apps;
  expect(status?.error).toBeNull();
});
afterAll(async () => {
  await executor?.stop();
  await server?.close();
});

const send = (name: string, datas: Record<string, unknown>[]) => app.inngest.send(datas.map((data) => ({ name, data })));

describe("rateLimit (drop)", () => {
  it("3 events at once under rateLimit 1 per 5 s start exactly 1 run", async () => {
    await send("flow/rate", [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const [run] = await waitForRuns("rate");
    expect(run?.output).toBe(1);
    // Runs are created in the transaction that stores the events: the two others were dropped, not delayed.
    expect(await listRuns("rate")).toHaveLength(1);
  });

  it("the limit applies per key", async () => {
    await send("flow/rate-keyed", [{ user: "a" }, { user: "a" }, { user: "b" }, { user: "b" }, { user: "a" }]);
    const runs = await waitForRuns("rate-keyed", { count: 2 });
    expect(runs.map((r) => r.output).sort()).toEqual(["a", "b"]);
    expect(await listRuns("rate-keyed")).toHaveLength(2);
  });
});

describe("throttle (delay)", () => {
  it("3 events at once under throttle 1 per 1 s all run, in order, one per second", async () => {
    await send("flow/throttle", [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const runs = await waitForRuns("throttle", { count: 3 });
    // (Runs created in one millisecond list in id order, which is random: the start order is what counts.)
    expect(runs.map((r) => r.output).sort()).toEqual([1, 2, 3]);
    const starts = started.throttle!;
    expect(starts.map((s) => s.n)).toEqual([1, 2, 3]);
    // Each run may start only one period after the previous one's slot (its next_at): never earlier.
    expect(starts[1]!.at - starts[0]!.at).toBeGreaterThanOrEqual(900);
    expect(starts[2]!.at - starts[0]!.at).toBeGreaterThanOrEqual(1900);
  });

  it("burst lets limit + burst runs start at once; later ones are queued, not dropped", async () => {
    await send("flow/throttle-burst", [{ k: "x", n: 1 }, { k: "x", n: 2 }, { k: "x", n: 3 }, { k: "x", n: 4 }, { k: "y", n: 5 }]);
    const runs = await waitForRuns("throttle-burst", { count: 4 });
    expect(runs.map((r) => r.output).sort()).toEqual([1, 2, 3, 5]);
    const all = await query<{ status: string; next_at: number; created_at: number }>(
      "SELECT status, next_at, created_at FROM executor_runs WHERE fn_id = 'flow-throttle-burst' ORDER BY created_at, id",
    );
    expect(all).toHaveLength(5);
    const queued = all.filter((r) => r.status === "queued");
    expect(queued).toHaveLength(1);
    // The 4th run of key x waits one full period (1 min) for its slot.
    expect(Number(queued[0]!.next_at) - Number(queued[0]!.created_at)).toBeGreaterThan(50_000);
  });
});

describe("debounce", () => {
  it("3 events at once give one run, with the last event, after the quiet period", async () => {
    await send("flow/debounce", [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const [run] = await waitForRuns("debounce");
    expect(run?.output).toEqual({ n: 3, count: 1 });
    expect(await listRuns("debounce")).toHaveLength(1);
  });

  it("timeout bounds the wait: events keep coming within the 1 min period, the run starts after the 1 s timeout", async () => {
    await send("flow/debounce-timeout", [{ k: "a", n: 1 }, { k: "a", n: 2 }, { k: "b", n: 9 }]);
    const runs = await waitForRuns("debounce-timeout", { count: 2, timeoutMs: 30_000 });
    expect(runs.map((r) => r.output).sort()).toEqual([2, 9]);
  });
});

describe("durable across a restart", () => {
  it("a debounced run and throttled runs queued while no executor runs start once, as they would have", async () => {
    await executor.stop();
    try {
      // Events are ingested by the event API, not the executor: the flow-control state is written to the database.
      await send("flow/debounce-restart", [{ n: 1 }, { n: 2 }, { n: 3 }]);
      await send("flow/throttle-restart", [{ n: 1 }, { n: 2 }, { n: 3 }]);
    } finally {
      executor = new Executor({ apps: [{ url: server.serveUrl, checkpointing: checkpointing() }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {} });
      await executor.start();
    }
    const [debounced] = await waitForRuns("debounce-restart");
    expect(debounced?.output).toBe(3);
    expect(await listRuns("debounce-restart")).toHaveLength(1);
    const throttled = await waitForRuns("throttle-restart", { count: 3 });
    expect(throttled.map((r) => r.output).sort()).toEqual([1, 2, 3]);
    // Their slots were given in arrival order, one period apart, when the events came in.
    const slots = await query<{ n: number; next_at: number }>(
      "SELECT json_extract(event, '$.data.n') AS n, next_at FROM executor_runs WHERE fn_id = 'flow-throttle-restart' ORDER BY n",
    );
    expect(Number(slots[0]!.next_at)).toBe(0); // the first starts at once
    expect(Number(slots[1]!.next_at)).toBeGreaterThan(0);
    expect(Number(slots[2]!.next_at) - Number(slots[1]!.next_at)).toBe(1000);
  });
});

describe("batchEvents", () => {
  it("maxSize 3: 3 events give one run that receives all 3 as `events`", async () => {
    await send("flow/batch", [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const [run] = await waitForRuns("batch");
    expect(run?.output).toEqual([1, 2, 3]);
    expect(await listRuns("batch")).toHaveLength(1);
  });

  it("batches per key; a batch that is not full starts at its timeout", async () => {
    await send("flow/batch-keyed", [{ k: "a", n: 1 }, { k: "b", n: 2 }, { k: "a", n: 3 }, { k: "a", n: 4 }]);
    const runs = await waitForRuns("batch-keyed", { count: 3 });
    expect(runs.map((r) => r.output).sort()).toEqual([["a1", "a3"], ["a4"], ["b2"]].sort());
  });
});

describe("concurrency", () => {
  it("every constraint of a concurrency array is enforced", async () => {
    await send("flow/two-keys", [
      { a: 1, b: 1 },
      { a: 1, b: 2 },
      { a: 2, b: 1 },
      { a: 2, b: 2 },
    ]);
    await waitForRuns("two-keys", { count: 4 });
    // Only the first constraint would let {a:1,b:1} and {a:2,b:1} run together (b1 at 2); only the second, a1 at 2.
    for (const k of ["a1", "a2", "b1", "b2"]) expect(maxActive[k], k).toBe(1);
  });

  it("scope env shares the limit across functions with the same key value", async () => {
    await send("flow/env", [{}, {}, {}]);
    await waitForRuns("env-one", { count: 3 });
    await waitForRuns("env-two", { count: 3 });
    expect(maxActive.env).toBe(1);
  });
});

describe("priority", () => {
  it("a waiting run with a higher priority starts before an earlier one", async () => {
    await send("flow/priority", [{ n: "blocker", p: 0 }]);
    await waitFor(async () => started.priority?.length === 1, { what: "the blocker to start" });
    await send("flow/priority", [{ n: "low", p: 0 }]);
    await send("flow/priority", [{ n: "high", p: 300 }]);
    await waitForRuns("priority", { count: 3 });
    expect(started.priority!.map((s) => s.n)).toEqual(["blocker", "high", "low"]);
  });
});

describe("singleton", () => {
  it("mode skip: 3 events at once start exactly 1 run", async () => {
    await send("flow/single-skip", [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const [run] = await waitForRuns("single-skip");
    expect(run?.output).toBe(1);
    expect(await listRuns("single-skip")).toHaveLength(1);
  });

  it("mode cancel: a new run cancels the running one of its key", async () => {
    await send("flow/single-cancel", [{ k: "x", n: 1 }]);
    await waitFor(async () => started["single-cancel"]?.length === 1, { what: "the first run to start" });
    await send("flow/single-cancel", [{ k: "x", n: 2 }]);
    const runs = await waitForRuns("single-cancel", { count: 2 });
    expect(runs.map((r) => [r.event.data.n, r.status])).toEqual([
      [1, "cancelled"],
      [2, "completed"],
    ]);
  });
});

describe("timeouts and cancelOn timeout", () => {
  it("timeouts.start cancels a run that could not start in time; it never runs", async () => {
    await send("flow/start-timeout", [{ n: "blocker" }]);
    await waitFor(async () => started["start-timeout"]?.length === 1, { what: "the blocker to start" });
    await send("flow/start-timeout", [{ n: "late" }]);
    const runs = await waitForRuns("start-timeout", { count: 2 });
    expect(runs.map((r) => [r.event.data.n, r.status])).toEqual([
      ["blocker", "completed"],
      ["late", "cancelled"],
    ]);
    expect(started["start-timeout"]!.map((s) => s.n)).toEqual(["blocker"]);
  });

  it("timeouts.finish cancels a run still going after it, and inngest/function.cancelled announces it", async () => {
    await send("flow/finish-timeout", [{}]);
    const [run] = await waitForRuns("finish-timeout");
    expect(run?.status).toBe("cancelled");
    const [announced] = await waitForRuns("on-cancelled");
    expect(announced?.output).toEqual({ message: "function cancelled", run: run?.id });
    await pause(2500); // past the 3 s sleep: the cancelled run must not resume
    expect(started["finish-timeout"]!.map((s) => s.n)).toEqual(["begin"]);
  });

  it("a cancelOn event after its timeout no longer cancels; one within it does", async () => {
    await send("flow/cancel-window", [{ n: "late-cancel" }]);
    await pause(1300);
    await send("flow/cancel-window", [{ n: "early-cancel" }]);
    await send("flow/cancel-window.stop", [{}]);
    const runs = await waitForRuns("cancel-window", { count: 2 });
    expect(Object.fromEntries(runs.map((r) => [r.event.data.n, r.status]))).toEqual({ "late-cancel": "completed", "early-cancel": "cancelled" });
  });
});

describe("system events", () => {
  it("inngest/function.finished triggers another function with the result", async () => {
    await send("flow/finisher", [{}]);
    const [run] = await waitForRuns("on-finished");
    expect(run?.output).toEqual({ result: 42, trigger: "flow/finisher" });
    expect(await listRuns("on-finished")).toHaveLength(1);
  });

  it("inngest/function.failed triggers another function with the error", async () => {
    await send("flow/breaker", [{}]);
    const [run] = await waitForRuns("on-failed");
    expect(run?.output).toBe("broke on purpose");
  });
});
