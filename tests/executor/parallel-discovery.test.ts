import { Inngest, group } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "inngest/edge";
import type { FetchHandler } from "@/lib/executor";
import { startApp, waitFor, waitForRuns } from "./harness";

/**
 * When the run is re-entered after parallel steps, as Inngest does it (pkg/execution/executor: shouldEnqueueDiscovery,
 * the parallel coalesce key of inngest/inngest#2200):
 * - an app that reports request version 1 (`optimizeParallelism: false`) is called again as soon as any parallel step
 *   finishes, so a branch moves on while a slow sibling still runs;
 * - a race-mode group (`group.parallel({ mode: "race" })`) likewise, whatever the version;
 * - the SDK's default (request version 2) waits for the whole parallel batch before the run goes on.
 * The order is read from what the steps recorded, not from timings: the slow step ends as soon as the branch's next
 * step has started, or after a long fallback when it never does.
 */

const log: string[] = [];
const started = new Set<string>();
/** How many times each step's body ran. */
const ran: Record<string, number> = {};
/** Set by the function's own code (outside any step) once it replays past `race-a1`: a discovery is under way. */
let replayedPastA1 = false;
let b1Returned = false;

/** The slow sibling: it ends once `next` has started (or after the fallback, so a lockstep run still finishes). */
async function slowUntil(name: string, next: string): Promise<string> {
  const fallback = Date.now() + 8_000;
  while (!started.has(next) && Date.now() < fallback) await new Promise((r) => setTimeout(r, 5));
  log.push(`${name} end`);
  return name;
}

function begin(name: string): string {
  started.add(name);
  log.push(`${name} start`);
  return name;
}

function build(origin: string) {
  const inngest = new Inngest({ id: "par", isDev: true, baseUrl: origin });
  const branches = (prefix: string) => async ({ step }: { step: any }) => {
    const fast = async () => {
      await step.run(`${prefix}-a1`, () => begin(`${prefix}-a1`));
      return step.run(`${prefix}-a2`, () => begin(`${prefix}-a2`));
    };
    const slow = () => step.run(`${prefix}-b1`, () => slowUntil(`${prefix}-b1`, `${prefix}-a2`));
    return Promise.all([fast(), slow()]);
  };
  const functions: ReturnType<typeof inngest.createFunction>[] = [
    // The SDK answers a function with optimizeParallelism: false with x-inngest-req-version: 1.
    inngest.createFunction({ id: "branches-v1", retries: 0, optimizeParallelism: false, triggers: [{ event: "par/v1" }] }, branches("v1")),
    inngest.createFunction({ id: "branches-v2", retries: 0, triggers: [{ event: "par/v2" }] }, branches("v2")),
    inngest.createFunction({ id: "race", retries: 0, triggers: [{ event: "par/race" }] }, async ({ step }) => {
      const winner = await group.parallel({ mode: "race" }, () =>
        Promise.race([step.run("r-fast", () => begin("r-fast")), step.run("r-slow", () => slowUntil("r-slow", "r-after"))]),
      );
      await step.run("r-after", () => begin("r-after"));
      return winner;
    }),
  ];
  functions.push(
    // Race-mode steps in two branches of Promise.all (the step option, as parallel tasks set it): the discovery after
    // a1 replays the function while b1 still runs, and b1 finishes during that call; the call then reports b1 as
    // planned, since its state did not hold b1 yet.
    inngest.createFunction({ id: "race-branches", retries: 0, triggers: [{ event: "par/race-branches" }] }, async ({ step }) => {
      const once = (id: string, fn: () => Promise<string> | string) =>
        step.run({ id, parallelMode: "race" }, async () => {
          ran[id] = (ran[id] ?? 0) + 1;
          return fn();
        });
      const a = async () => {
        await once("race-a1", () => "a1");
        replayedPastA1 = true;
        return once("race-a2", () => "a2");
      };
      const b = () =>
        once("race-b1", async () => {
          const fallback = Date.now() + 8_000;
          while (!replayedPastA1 && Date.now() < fallback) await new Promise((r) => setTimeout(r, 5));
          b1Returned = true;
          return "b1";
        });
      return Promise.all([a(), b()]);
    }),
    // Race-mode steps in one branch while the other branch waits for an event (a parallel task's steps while another
    // task waits for a person): each step that finishes moves its branch on, as Inngest enqueues a discovery after a
    // race-mode step whatever else of the run is pending.
    inngest.createFunction({ id: "race-wait", retries: 0, triggers: [{ event: "par/race-wait" }] }, async ({ step }) => {
      const steps = async () => {
        for (const id of ["rw-1", "rw-2", "rw-3"]) await step.run({ id, parallelMode: "race" }, () => begin(id));
        return "steps";
      };
      const waits = async () => ((await step.waitForEvent("rw-wait", { event: "par/rw-go", timeout: "1h" })) ? "went" : "timed out");
      return Promise.all([steps(), waits()]);
    }),
  );
  return { inngest, functions };
}

let app: Awaited<ReturnType<typeof startApp>>;

beforeAll(async () => {
  app = await startApp(build);
  // The discovery that replayed past race-a1 answers only once race-b1's result is stored (its call has returned and a
  // moment passed): the sibling finished while the discovery was under way, deterministically.
  const inner = serve({ client: app.inngest, functions: app.functions }) as FetchHandler;
  let held = false;
  app.server.setHandler(async (request) => {
    const response = await inner(request);
    if (!held && replayedPastA1 && new URL(request.url).searchParams.get("stepId") === "step") {
      held = true;
      const fallback = Date.now() + 8_000;
      while (!b1Returned && Date.now() < fallback) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 300));
    }
    return response;
  });
});
afterAll(async () => {
  await app?.close();
});

describe("parallel steps: when the run is called again", () => {
  it("an app on request version 1 moves a branch on while its slow sibling still runs", async () => {
    await app.send({ name: "par/v1", data: {} });
    const [run] = await waitForRuns("branches-v1");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["v1-a2", "v1-b1"]);
    expect(log.indexOf("v1-a2 start")).toBeGreaterThan(-1);
    expect(log.indexOf("v1-a2 start")).toBeLessThan(log.indexOf("v1-b1 end"));
  });

  it("a race-mode group goes on after its first step, while the losing step still runs", async () => {
    await app.send({ name: "par/race", data: {} });
    const [run] = await waitForRuns("race");
    expect(run?.status).toBe("completed");
    expect(run?.output).toBe("r-fast");
    expect(log.indexOf("r-after start")).toBeGreaterThan(-1);
    expect(log.indexOf("r-after start")).toBeLessThan(log.indexOf("r-slow end"));
  });

  it("race-mode branches: a step that finished while a discovery was under way is not run again", async () => {
    await app.send({ name: "par/race-branches", data: {} });
    const [run] = await waitForRuns("race-branches");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["a2", "b1"]);
    expect(ran).toEqual({ "race-a1": 1, "race-a2": 1, "race-b1": 1 });
  });

  it("race-mode steps in one branch run to its end while another branch waits for an event", async () => {
    await app.send({ name: "par/race-wait", data: {} });
    await waitFor(async () => started.has("rw-3"), { what: "the steps' branch to reach its last step while the other branch waits" });
    expect(started.has("rw-1") && started.has("rw-2")).toBe(true);
    await app.send({ name: "par/rw-go", data: {} });
    const [run] = await waitForRuns("race-wait");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["steps", "went"]);
  });

  it("the SDK's default (request version 2) waits for the whole batch, as Inngest coalesces it", async () => {
    await app.send({ name: "par/v2", data: {} });
    const [run] = await waitForRuns("branches-v2");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["v2-a2", "v2-b1"]);
    expect(log.indexOf("v2-b1 end")).toBeGreaterThan(-1);
    expect(log.indexOf("v2-b1 end")).toBeLessThan(log.indexOf("v2-a2 start"));
  });
});
