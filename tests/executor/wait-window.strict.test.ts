import { expect, it } from "vitest";
import { waitStats } from "@/lib/executor/events";
import { harness } from "./harness";

/**
 * The wait-window suite again, with the executor in strict "cloud" mode: no look-back (inngest/inngest#1433). Each
 * case asserts Cloud's outcome — an event ingested before the wait is stored never matches; one after it does.
 */
harness.strict = true;
await import("./wait-window.test");

it("no wait was resolved by looking back (the mode is real)", () => {
  expect(waitStats.fromHistory).toBe(0);
  expect(waitStats.byIncomingEvent).toBeGreaterThan(0);
});
