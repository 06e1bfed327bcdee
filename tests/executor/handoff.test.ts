import { Inngest } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendEvents } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { listRuns, startApp, waitFor, waitForRuns } from "./harness";

/*
 * Hand-off (lib/executor/scheduling.ts localHandoff): the runs an ingested event makes runnable (a wait it resolves, a
 * run it starts) are leased by this process's executor in the event's own transaction, with acquire()'s UPDATE, so
 * the lease is committed with the event and the run is driven without another read and commit. What ACQUIRE_SQL
 * refuses (a concurrency limit, a run not due) and what exceeds the executor's free slots is left to wake() as before.
 */

type Lease = { status: string; lease_owner: string | null; generation: number };
const leaseOf = async (runId: string) => (await query<Lease>("SELECT status, lease_owner, generation FROM executor_runs WHERE id = ?", [runId]))[0]!;

let app: Awaited<ReturnType<typeof startApp>>;
let release: () => void = () => undefined;

beforeAll(async () => {
  app = await startApp(
    (origin) => {
      const inngest = new Inngest({ id: "handoff", isDev: true, baseUrl: origin });
      const waiter = inngest.createFunction({ id: "waiter", retries: 0, triggers: [{ event: "handoff/start" }] }, async ({ event, step }) => {
        await step.run("before", () => 1);
        const got = await step.waitForEvent("go", { event: "handoff/go", match: "data.k", timeout: "1h" });
        return { k: event.data.k, got: got?.data.k ?? null };
      });
      // One at a time: a second run triggered while the first holds its slot is not taken by the hand-off.
      const gate = new Promise<void>((r) => (release = r));
      const single = inngest.createFunction(
        { id: "single", retries: 0, concurrency: { limit: 1 }, triggers: [{ event: "handoff/single" }] },
        async ({ event, step }) => {
          await step.run("hold", async () => {
            if (event.data.hold) await gate;
            return event.data.n;
          });
          return event.data.n;
        },
      );
      return { inngest, functions: [waiter, single] };
    },
    { leaseMs: 30_000 },
  );
});
afterAll(async () => {
  release();
  await app?.close();
});

describe("hand-off of runs an ingest makes runnable", () => {
  it("a started run and a resumed wait are leased by the local executor in the event's own commit", async () => {
    await sendEvents({ name: "handoff/start", data: { k: "a" } });
    // When sendEvents returns, the event's transaction has committed: the new run is leased already (no acquire() yet
    // could have run, it is one await away at least).
    const [started] = await listRuns("waiter");
    expect(started).toBeDefined();
    expect(await leaseOf(started!.id)).toMatchObject({ status: "running", lease_owner: app.executor.workerId, generation: 1 });

    await waitFor(async () => (await leaseOf(started!.id)).status === "waiting", { what: "the run to wait" });
    const parked = await leaseOf(started!.id);
    expect(parked.lease_owner).toBeNull();

    await sendEvents({ name: "handoff/go", data: { k: "a" } });
    const resumed = await leaseOf(started!.id);
    expect(resumed).toMatchObject({ status: "running", lease_owner: app.executor.workerId });
    expect(resumed.generation).toBeGreaterThan(parked.generation);

    const [run] = await waitForRuns("waiter");
    expect(run).toMatchObject({ status: "completed", output: { k: "a", got: "a" } });
  });

  it("a run over its concurrency limit is not taken, and starts when the slot frees", async () => {
    await sendEvents({ name: "handoff/single", data: { n: 1, hold: true } });
    const [first] = await listRuns("single");
    expect((await leaseOf(first!.id)).lease_owner).toBe(app.executor.workerId);
    // Leased, it holds the function's one slot until it finishes (its step waits for `release`).
    await sendEvents({ name: "handoff/single", data: { n: 2 } });
    const second = (await listRuns("single")).find((r) => r.id !== first!.id)!;
    expect(await leaseOf(second.id)).toMatchObject({ status: "queued", lease_owner: null, generation: 0 });

    release();
    const runs = await waitForRuns("single", { count: 2 });
    expect(runs.map((r) => r.output).sort()).toEqual([1, 2]);
  });
});
