import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, type FetchHandler } from "@/lib/executor";
import { waitStats } from "@/lib/executor/events";
import { checkpointing, harness, listRuns, startServer, strictOption, waitFor, waitForRuns } from "./harness";

let release!: () => void;
const gate = new Promise<void>((r) => (release = r));
let slowStarted = false;

function buildApp(origin: string) {
  const inngest = new Inngest({ id: "rel", isDev: true, baseUrl: origin });
  const functions = [
    // The event is sent while the function is on its way to the wait: from inside the step before it, or in the very
    // next tick after the step's response — before or around the moment the executor stores the wait.
    inngest.createFunction({ id: "signal-race", retries: 0, triggers: [{ event: "rel/start" }] }, async ({ event, step }) => {
      await step.run("announce", async () => {
        const signal = () => inngest.send({ name: "rel/signal", data: { k: event.data.k } });
        if (Number(event.data.k) % 2 === 0) await signal();
        else setImmediate(() => void signal());
      });
      // Strict mode: signals sent before the wait is stored are lost (as on Inngest Cloud); those waits time out.
      const got = await step.waitForEvent("signal", { event: "rel/signal", match: "data.k", timeout: harness.strict ? "4s" : "1h" });
      return got?.data.k ?? null;
    }),
    inngest.createFunction({ id: "quick", triggers: [{ event: "rel/quick" }] }, async ({ event, step }) => {
      const a = await step.run("one", () => Number(event.data.n));
      return step.run("two", () => a * 2);
    }),
    inngest.createFunction({ id: "slow", triggers: [{ event: "rel/slow" }] }, async ({ step }) => {
      return step.run("wait-for-gate", async () => {
        slowStarted = true;
        await gate;
        return "slow-done";
      });
    }),
    inngest.createFunction({ id: "always-fails", retries: 2, triggers: [{ event: "rel/fail" }] }, async ({ step }) => {
      await step.run("fail", () => {
        throw new Error("always");
      });
    }),
  ];
  return { inngest, functions };
}

let server: Awaited<ReturnType<typeof startServer>>;
let app: ReturnType<typeof buildApp>;
let executor: Executor;

beforeAll(async () => {
  server = await startServer();
  app = buildApp(server.origin);
  server.setHandler(serve({ client: app.inngest, functions: app.functions }) as FetchHandler);
  executor = new Executor({ apps: [{ url: server.serveUrl, checkpointing: checkpointing() }], pollMs: 50, leaseMs: 5000, backoff: () => 20, log: () => {}, ...strictOption() });
  await executor.start();
});
afterAll(async () => {
  release();
  await executor?.stop();
  await server?.close();
});

// Look-back (the default) catches every signal; strict mode asserts Cloud's behaviour instead (no test is skipped).
if (!harness.strict) describe("better than Inngest: no event lost before its wait is stored", () => {
  it("1,000 runs, each signalled in the instant its wait begins, all receive their signal", { timeout: 180_000 }, async () => {
    const total = 1000;
    for (let i = 0; i < total; i += 100) {
      await app.inngest.send(Array.from({ length: 100 }, (_, j) => ({ name: "rel/start", data: { k: i + j } })));
    }
    const runs = await waitForRuns("signal-race", { count: total, timeoutMs: 150_000 });
    expect(runs.filter((r) => r.status !== "completed").map((r) => [r.status, r.error])).toEqual([]);
    const outputs = new Set(runs.map((r) => r.output));
    for (let k = 0; k < total; k++) expect(outputs.has(k)).toBe(true);
    // Half the signals were stored before their wait existed: those were found by the wait looking back.
    expect(waitStats.fromHistory).toBeGreaterThanOrEqual(total / 2);
  });
});
else describe("as Inngest Cloud (strict mode): an event sent before its wait is stored is lost", () => {
  it("200 runs signalled from the step before their wait: none receives that signal, every wait times out", { timeout: 120_000 }, async () => {
    const total = 200;
    await app.inngest.send(Array.from({ length: total }, (_, k) => ({ name: "rel/start", data: { k } })));
    const runs = await waitForRuns("signal-race", { count: total, timeoutMs: 100_000 });
    expect(runs.filter((r) => r.status !== "completed").map((r) => [r.status, r.error])).toEqual([]);
    // Even k: the signal was stored before the step's result, so strictly before the wait: never caught.
    const evens = runs.filter((r) => Number(r.event.data.k) % 2 === 0);
    expect(evens).toHaveLength(total / 2);
    expect(evens.filter((r) => r.output !== null)).toEqual([]);
    expect(waitStats.fromHistory).toBe(0);
  });
});

describe("runs are independent", () => {
  it("100 runs in flight finish while a slow run holds a step and a failing run retries", { timeout: 60_000 }, async () => {
    await app.inngest.send({ name: "rel/slow", data: {} });
    await app.inngest.send({ name: "rel/fail", data: {} });
    await waitFor(async () => slowStarted, { what: "slow step to start" });
    await app.inngest.send(Array.from({ length: 100 }, (_, n) => ({ name: "rel/quick", data: { n } })));
    const quick = await waitForRuns("quick", { count: 100, timeoutMs: 50_000 });
    expect(quick.map((r) => r.output).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: 100 }, (_, n) => n * 2));
    const [slow] = await listRuns("slow");
    expect(slow?.status).toBe("running");
    release();
    const [done] = await waitForRuns("slow");
    expect(done?.output).toBe("slow-done");
    const [failed] = await waitForRuns("always-fails");
    expect(failed?.status).toBe("failed");
    expect(failed?.error).toMatchObject({ message: "always" });
  });
});
