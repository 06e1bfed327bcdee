import { expect, it } from "vitest";
import { waitStats } from "@/lib/executor/events";
import { harness, listRuns } from "./harness";

/**
 * The reliability suite again, with the executor in strict "cloud" mode (no wait look-back, Inngest Cloud's limits): its
 * assertions hold under Cloud's semantics. The same as running the suite with GATEHOUSE_EXECUTOR_STRICT=cloud.
 */
harness.strict = true;
await import("./reliability.test");

it("the suite ran in strict mode (the mode is real): no wait was resolved by looking back, and early signals were lost", async () => {
  expect(waitStats.fromHistory).toBe(0);
  const runs = await listRuns("signal-race");
  expect(runs.filter((r) => r.output === null).length).toBeGreaterThanOrEqual(100);
});
