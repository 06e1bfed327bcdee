import { Inngest, group } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, waitForRuns } from "./harness";

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
  const functions = [
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
  return { inngest, functions };
}

let app: Awaited<ReturnType<typeof startApp>>;

beforeAll(async () => {
  app = await startApp(build);
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

  it("the SDK's default (request version 2) waits for the whole batch, as Inngest coalesces it", async () => {
    await app.send({ name: "par/v2", data: {} });
    const [run] = await waitForRuns("branches-v2");
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual(["v2-a2", "v2-b1"]);
    expect(log.indexOf("v2-b1 end")).toBeGreaterThan(-1);
    expect(log.indexOf("v2-b1 end")).toBeLessThan(log.indexOf("v2-a2 start"));
  });
});
