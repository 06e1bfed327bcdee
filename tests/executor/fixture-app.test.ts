import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor } from "@/lib/executor";
import type { Probe } from "../fixtures/inngest-app/functions";
import { checkpointing, listRuns, startServer, waitForRuns } from "./harness";

/**
 * Any Inngest app: tests/fixtures/inngest-app runs as a separate plain Node process (inngest/node serve); the executor
 * drives it over HTTP, and the app sends its events to the executor's event API (the test server's /e/:key).
 */
let events: Awaited<ReturnType<typeof startServer>>;
let fixture: ChildProcess;
let appOrigin: string;
const app = {} as { executor: Executor; send: (e: unknown) => Promise<unknown> };
const probe = { calls: {} } as Probe;

async function refreshProbe(): Promise<Probe> {
  Object.assign(probe, await (await fetch(`${appOrigin}/probe`)).json());
  return probe;
}

beforeAll(async () => {
  events = await startServer();
  fixture = spawn(process.execPath, ["--import", "tsx", path.join("tests", "fixtures", "inngest-app", "server.ts"), "0", events.origin], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`fixture app did not start: ${out}`)), 30_000);
    fixture.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    fixture.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  });
  appOrigin = `http://127.0.0.1:${port}`;
  app.executor = new Executor({ apps: [{ url: `${appOrigin}/api/inngest`, checkpointing: checkpointing() }], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {} });
  await app.executor.start();
  // Events reach the executor the way the app's own inngest.send() does: POST /e/:key.
  app.send = async (e) => {
    const res = await fetch(`${events.origin}/e/test-key`, { method: "POST", body: JSON.stringify(e), headers: { "content-type": "application/json" } });
    return res.json();
  };
});
afterAll(async () => {
  await app.executor?.stop();
  fixture?.kill("SIGKILL");
  await events?.close();
});

describe("executor drives an Inngest app over HTTP", () => {
  it("syncs the app in-band and lists its functions", async () => {
    const status = await app.executor.status();
    expect(status.apps).toHaveLength(1);
    expect(status.apps[0]?.appId).toBe("fixture-app");
    expect(status.apps[0]?.functions).toBeGreaterThanOrEqual(12);
    expect(status.apps[0]?.error).toBeNull();
  });

  it("runs sequential steps and returns the function's output", async () => {
    await app.send({ name: "fixture/sequential", data: { key: "s1" } });
    const [run] = await waitForRuns("sequential");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual({ sum: 6 });
    expect((await refreshProbe()).calls["seq-a-s1"]).toBe(1);
  });

  it("runs parallel steps and continues when all are done", async () => {
    await app.send({ name: "fixture/parallel", data: {} });
    const [run] = await waitForRuns("parallel");
    expect(run?.output).toEqual({ values: ["one", "two", "three"], after: "one+two+three" });
  });
});

describe("fixture app: outputs as Inngest gives them", () => {
  it("Promise.race of steps and group.parallel race mode", async () => {
    await app.send({ name: "fixture/race", data: {} });
    const [run] = await waitForRuns("race");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual({ winner: "fast", grouped: "g-fast" });
  });

  it("step.sendEvent triggers another function", async () => {
    await app.send({ name: "fixture/emit", data: { key: "e1" } });
    const [emitter] = await waitForRuns("emitter");
    expect(emitter?.output).toEqual({ sentIds: 1 });
    const [emitted] = await waitForRuns("emitted");
    expect(emitted?.output).toEqual({ receivedFrom: "e1" });
  });

  it("step.invoke runs the child and returns its output", async () => {
    await app.send({ name: "fixture/invoke", data: {} });
    const [run] = await waitForRuns("invoker");
    expect(run?.output).toEqual({ doubled: 42 });
    const [child] = await waitForRuns("child");
    expect(child?.event.data).toEqual({ n: 21 });
  });

  it("a caught step error is retried, then handed to the function", async () => {
    await app.send({ name: "fixture/caught", data: {} });
    const [run] = await waitForRuns("caught");
    expect(run?.status).toBe("completed");
    // retries: 1 → two attempts of the step, then the error reaches the catch block.
    expect(run?.output).toEqual({ caught: "boom failed", attempts: 2 });
  });

  it("an uncaught step error fails the run and runs onFailure", async () => {
    await app.send({ name: "fixture/uncaught", data: { key: "u1" } });
    const [run] = await waitForRuns("uncaught");
    expect(run?.status).toBe("failed");
    expect(run?.error).toMatchObject({ message: expect.stringContaining("explode failed") });
    const [failure] = await waitForRuns("uncaught-failure");
    expect(failure?.status).toBe("completed");
    expect(failure?.output).toEqual({ handled: "explode failed", original: "u1" });
  });

  it("NonRetriableError fails at once", async () => {
    await app.send({ name: "fixture/non-retriable", data: {} });
    const [run] = await waitForRuns("non-retriable");
    expect(run?.status).toBe("failed");
    expect(run?.error).toMatchObject({ message: expect.stringContaining("do not retry me") });
    expect((await refreshProbe()).calls.fatal).toBe(1);
  });

  it("RetryAfterError schedules the retry after the given delay, not the backoff", async () => {
    await app.send({ name: "fixture/retry-after", data: {} });
    const [run] = await waitForRuns("retry-after");
    expect(run?.output).toBe("ok");
    await refreshProbe();
    expect(probe.calls.later).toBe(2);
    const [first, second] = probe.times?.later ?? [];
    // The executor's backoff here is 20 ms; RetryAfterError asked for 1 s.
    expect(second! - first!).toBeGreaterThanOrEqual(900);
  });

  it("waitForEvent with a schema and match returns the matching event", async () => {
    await app.send({ name: "fixture/order", data: { orderId: "o-1" } });
    await app.send({ name: "fixture/order", data: { orderId: "o-2" } });
    await app.send({ name: "fixture/approval", data: { orderId: "o-2", approved: true } });
    const [first] = await waitForRuns("waiter", { where: (r) => r.event.data.orderId === "o-2" });
    expect(first?.output).toEqual({ approved: true, orderId: "o-2" });
    const pending = (await listRuns("waiter")).find((r) => r.event.data.orderId === "o-1");
    expect(pending?.status).toBe("waiting");
    await app.send({ name: "fixture/approval", data: { orderId: "o-1", approved: false } });
    const [second] = await waitForRuns("waiter", { where: (r) => r.event.data.orderId === "o-1" });
    expect(second?.output).toEqual({ approved: false, orderId: "o-1" });
  });
});
