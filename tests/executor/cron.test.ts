import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, type FetchHandler } from "@/lib/executor";
import { nextCronTime, parseCron } from "@/lib/executor/registry";
import { query } from "@/lib/executor/store";
import { checkpointing, listRuns, startServer, waitFor } from "./harness";

/**
 * Cron triggers on a fake clock (the executor's `now` option): a `* * * * *` function fires once per minute, across a
 * restart and with two executor processes on one database, never twice and never missing a due time.
 */

let clock = Date.parse("2026-03-02T10:00:30.000Z");
const minute = (m: number) => Date.parse(`2026-03-02T10:${String(m).padStart(2, "0")}:00.000Z`);

let server: Awaited<ReturnType<typeof startServer>>;
let handler: FetchHandler;
const running = new Set<Executor>();

async function startExecutor(workerId: string): Promise<Executor> {
  const executor = new Executor({
    apps: [{ url: server.serveUrl, checkpointing: checkpointing() }],
    workerId,
    pollMs: 30,
    leaseMs: 2000,
    log: () => {},
    now: () => clock,
  });
  await executor.start();
  running.add(executor);
  return executor;
}

async function stopExecutor(executor: Executor): Promise<void> {
  await executor.stop();
  running.delete(executor);
}

beforeAll(async () => {
  server = await startServer();
  const inngest = new Inngest({ id: "cron", isDev: true, baseUrl: server.origin });
  const fns = [
    inngest.createFunction({ id: "every-minute", triggers: [{ cron: "TZ=Europe/Paris * * * * *" }] }, async ({ event }) => ({
      name: event.name,
      ts: event.ts,
    })),
  ];
  handler = serve({ client: inngest, functions: fns }) as FetchHandler;
  server.setHandler(handler);
});
afterAll(async () => {
  for (const e of running) await e.stop();
  await server?.close();
});

/** The due times (event ts) of the completed runs, in order. */
async function firedAt(): Promise<number[]> {
  const runs = await listRuns("every-minute");
  return runs.map((r) => (r.output as { ts: number } | null)?.ts ?? -1);
}

const dueStored = () => query<{ at: number }>("SELECT at FROM executor_flow WHERE fn_id = 'cron-every-minute' AND kind = 'cron'");

async function untilFired(count: number) {
  await waitFor(
    async () => {
      const runs = await listRuns("every-minute");
      return runs.length >= count && runs.every((r) => r.status === "completed");
    },
    { what: `${count} completed cron runs` },
  );
}

describe("cron triggers", () => {
  it("the TZ= prefix selects the timezone", () => {
    const kolkata = parseCron("TZ=Asia/Kolkata 30 10 * * *");
    expect(kolkata).toEqual({ pattern: "30 10 * * *", timezone: "Asia/Kolkata" });
    // 10:30 in Kolkata (UTC+5:30) is 05:00 UTC.
    expect(new Date(nextCronTime(kolkata, Date.parse("2026-03-02T00:00:00Z"))!).toISOString()).toBe("2026-03-02T05:00:00.000Z");
    expect(new Date(nextCronTime(parseCron("0 9 * * *"), Date.parse("2026-03-02T00:00:00Z"))!).toISOString()).toBe("2026-03-02T09:00:00.000Z");
  });

  it("* * * * * fires once a minute, across a restart and with two executors, never twice and never missing one", async () => {
    const a = await startExecutor("cron-a");
    // First sight of the trigger: the next due time is stored, nothing fires for the past.
    await waitFor(async () => (await dueStored())[0]?.at === minute(1), { what: "the first due time to be stored" });
    expect(await listRuns("every-minute")).toHaveLength(0);

    clock = minute(1) + 5_000;
    await untilFired(1);
    expect(await firedAt()).toEqual([minute(1)]);
    await waitFor(async () => (await dueStored())[0]?.at === minute(2), { what: "the due time to move on" });

    // Restart within the same minute: the new process reads the stored due time and does not fire 10:01 again.
    await stopExecutor(a);
    clock = minute(1) + 40_000;
    const b = await startExecutor("cron-b");
    clock = minute(2);
    await untilFired(2);
    expect(await firedAt()).toEqual([minute(1), minute(2)]);

    // Down over a due time: the missed 10:03 fires once when an executor is back.
    await stopExecutor(b);
    clock = minute(3) + 20_000;
    // Two processes on one database from here on: each due time still starts exactly one run.
    const c = await startExecutor("cron-c");
    const d = await startExecutor("cron-d");
    await untilFired(3);
    clock = minute(4);
    await untilFired(4);
    clock = minute(5) + 1;
    await untilFired(5);
    // Both processes have polled many times since (the due time moved on only after the run was created).
    await waitFor(async () => (await dueStored())[0]?.at === minute(6), { what: "the due time to move on" });
    expect(await firedAt()).toEqual([minute(1), minute(2), minute(3), minute(4), minute(5)]);
    const runs = await listRuns("every-minute");
    expect(runs.every((r) => (r.output as { name: string }).name === "inngest/scheduled.timer")).toBe(true);
    await stopExecutor(c);
    await stopExecutor(d);
  });
});
