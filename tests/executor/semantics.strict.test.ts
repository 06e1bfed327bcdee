import { expect, it } from "vitest";
import { waitStats } from "@/lib/executor/events";
import { harness } from "./harness";

/**
 * The semantics suite again, with the executor in strict "cloud" mode (no wait look-back, Inngest Cloud's limits): its
 * assertions hold under Cloud's semantics. The same as running the suite with GATEHOUSE_EXECUTOR_STRICT=cloud.
 */
harness.strict = true;
await import("./semantics.test");

it("the suite ran in strict mode (the mode is real): no wait was resolved by looking back", () => {
  expect(waitStats.fromHistory).toBe(0);
  expect(waitStats.byIncomingEvent).toBeGreaterThan(0);
});
