import { Inngest } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { query } from "@/lib/executor/store";
import { listRuns, startApp, waitFor, waitForRuns } from "./harness";

/**
 * A sleep, wait or invoke of one branch that resumes moves its branch on whatever else of the run is in flight, as
 * Inngest enqueues a discovery when it resumes a pause or a sleep (pkg/execution/executor: Resume, the KindSleep item,
 * shouldEnqueueDiscovery) — except while ordinary parallel steps of a request-version-2 batch are pending, which it
 * coalesces. The branches' steps here are race-mode, as parallel tasks run them (inngest/run/flow.ts). The order is read
 * from what the steps recorded: the long step ends as soon as the other branch's next step has started, or after a
 * fallback when it never does (then the order shows it).
 */

const log: string[] = [];
const started = new Set<string>();
/** How many times each step's body ran. */
const ran: Record<string, number> = {};

function begin(name: string): string {
  started.add(name);
  ran[name] = (ran[name] ?? 0) + 1;
  log.push(`${name} start`);
  return name;
}

/** The long step: it ends once `next` has started, or after `fallbackMs`. */
async function longUntil(name: string, next: string, fallbackMs = 8_000): Promise<string> {
  begin(name);
  const fallback = Date.now() + fallbackMs;
  while (!started.has(next) && Date.now() < fallback) await new Promise((r) => setTimeout(r, 5));
  log.push(`${name} end`);
  return name;
}

function build(origin: string) {
  const inngest = new Inngest({ id: "wake", isDev: true, baseUrl: origin });
  const race = (id: string) => ({ id, parallelMode: "race" as const });
  const functions = [
    inngest.createFunction({ id: "sleep-branch", retries: 0, triggers: [{ event: "wake/sleep" }] }, async ({ step }) => {
      const long = () => step.run(race("sl-long"), () => longUntil("sl-long", "sl-after"));
      const nap = async () => {
        await step.sleep("sl-nap", "50ms");
        return step.run(race("sl-after"), () => begin("sl-after"));
      };
      return Promise.all([long(), nap()]);
    }),
    inngest.createFunction({ id: "wait-branch", retries: 0, triggers: [{ event: "wake/wait" }] }, async ({ step }) => {
      const long = () => step.run(race("wt-long"), () => longUntil("wt-long", "wt-after"));
      const gate = async () => {
        const approved = await step.waitForEvent("wt-gate", { event: "wake/wt-go", timeout: "1h" });
        return step.run(race("wt-after"), () => begin(approved ? "wt-after" : "wt-timed-out"));
      };
      return Promise.all([long(), gate()]);
    }),
    // Ordinary steps (request version 2): the batch is coalesced, the sleep's branch waits for the long step.
    inngest.createFunction({ id: "sleep-coalesced", retries: 0, triggers: [{ event: "wake/coalesced" }] }, async ({ step }) => {
      const long = () => step.run("co-long", () => longUntil("co-long", "co-after", 1_500));
      const nap = async () => {
        await step.sleep("co-nap", "50ms");
        return step.run("co-after", () => begin("co-after"));
      };
      return Promise.all([long(), nap()]);
    }),
    // Nothing in flight: the run is parked on two waits, and the one that resolves first moves its branch on.
    inngest.createFunction({ id: "two-waits", retries: 0, triggers: [{ event: "wake/two" }] }, async ({ step }) => {
      const first = async () => {
        await step.waitForEvent("tw-a", { event: "wake/tw-a", timeout: "1h" });
        return step.run("tw-after-a", () => begin("tw-after-a"));
      };
      const second = async () => ((await step.waitForEvent("tw-b", { event: "wake/tw-b", timeout: "1h" })) ? "b" : "no b");
      return Promise.all([first(), second()]);
    }),
  ];
  return { inngest, functions };
}

let app: Awaited<ReturnType<typeof startApp>>;

beforeAll(async () => {
  app = await startApp(build);
});
afterAll(async () => {
  await app?.close();
});

describe("a branch that resumes while another branch's step runs", () => {
  it("a sleep that ends moves its branch on before the other branch's long race-mode step ends", async () => {
    await app.send({ name: "wake/sleep", data: {} });
    const [run] = await waitForRuns("sleep-branch");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["sl-long", "sl-after"]);
    expect(log.indexOf("sl-after start")).toBeGreaterThan(-1);
    expect(log.indexOf("sl-after start")).toBeLessThan(log.indexOf("sl-long end"));
    expect([ran["sl-long"], ran["sl-after"]]).toEqual([1, 1]);
  });

  it("a wait resolved by an incoming event moves its branch on before the other branch's long step ends", async () => {
    await app.send({ name: "wake/wait", data: {} });
    await waitFor(async () => started.has("wt-long"), { what: "the long step to start" });
    // The wait is stored with the long step (one batch); the event comes while the step runs.
    await waitFor(async () => (await query("SELECT 1 FROM executor_pending WHERE kind = 'wait' AND event_name = 'wake/wt-go'")).length > 0, {
      what: "the wait to be stored",
    });
    await app.send({ name: "wake/wt-go", data: {} });
    const [run] = await waitForRuns("wait-branch");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["wt-long", "wt-after"]);
    expect(log.indexOf("wt-after start")).toBeGreaterThan(-1);
    expect(log.indexOf("wt-after start")).toBeLessThan(log.indexOf("wt-long end"));
    expect([ran["wt-long"], ran["wt-after"]]).toEqual([1, 1]);
  });

  it("ordinary parallel steps (request version 2) stay coalesced: the sleep's branch goes on after the long step", async () => {
    await app.send({ name: "wake/coalesced", data: {} });
    const [run] = await waitForRuns("sleep-coalesced");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["co-long", "co-after"]);
    expect(log.indexOf("co-long end")).toBeGreaterThan(-1);
    expect(log.indexOf("co-long end")).toBeLessThan(log.indexOf("co-after start"));
    expect([ran["co-long"], ran["co-after"]]).toEqual([1, 1]);
  });

  it("a run parked on two waits moves the branch whose wait resolved on, while the other still waits", async () => {
    await app.send({ name: "wake/two", data: {} });
    const parked = await waitFor(async () => (await listRuns("two-waits")).find((r) => r.status === "waiting"), { what: "the run to wait" });
    await waitFor(async () => (await query("SELECT 1 FROM executor_pending WHERE run_id = ?", [parked.id])).length === 2, {
      what: "both waits to be stored",
    });
    await app.send({ name: "wake/tw-a", data: {} });
    await waitFor(async () => started.has("tw-after-a"), { what: "the first branch's step after its wait" });
    expect((await query("SELECT 1 FROM executor_pending WHERE run_id = ? AND kind = 'wait'", [parked.id])).length).toBe(1);
    await app.send({ name: "wake/tw-b", data: {} });
    const [run] = await waitForRuns("two-waits");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["tw-after-a", "b"]);
    expect(ran["tw-after-a"]).toBe(1);
  });
});
