import { expect, it } from "vitest";
import { checkpointStats } from "@/lib/executor/checkpoint";
import { harness } from "./harness";

/**
 * The flow-control suite again, with the app checkpointing: the executor sends fn_id/qi_id and the app reports its steps to
 * /v1/checkpoint instead of one call per step. Same functions, same expected outputs.
 */
harness.mode = "checkpointed";
await import("./flow-control.test");

it("the app checkpointed its steps (the mode is real)", () => {
  expect(checkpointStats.stored).toBeGreaterThan(0);
});
