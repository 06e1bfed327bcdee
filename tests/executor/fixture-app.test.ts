import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFixtureApp, type Probe } from "../fixtures/inngest-app/functions";
import { listRuns, startApp, waitForRuns } from "./harness";

const probe: Probe = { calls: {} };
let app: Awaited<ReturnType<typeof startApp>>;

beforeAll(async () => {
  app = await startApp((origin) => createFixtureApp({ baseUrl: origin, probe }));
});
afterAll(async () => app?.close());

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
    expect(probe.calls["seq-a-s1"]).toBe(1);
  });

  it("runs parallel steps and continues when all are done", async () => {
    await app.send({ name: "fixture/parallel", data: {} });
    const [run] = await waitForRuns("parallel");
    expect(run?.output).toEqual({ values: ["one", "two", "three"], after: "one+two+three" });
  });
});
