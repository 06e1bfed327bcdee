import { describe, expect, it } from "vitest";
import { checkpointBodySchema, plainCheckpointBody } from "@/lib/executor/checkpoint";

/**
 * The checkpoint endpoint checks the SDK's body by hand on its hot path (plainCheckpointBody) and leaves everything it
 * does not accept to checkpointBodySchema. The hand check must accept only bodies the schema accepts, and accept the
 * bodies the SDK sends (else every checkpoint pays for zod again).
 */
const valid = {
  run_id: "r1",
  fn_id: "app-fn",
  qi_id: "worker-1/3",
  generation_id: 3,
  request_started_at: 1_700_000_000_000,
  steps: [{ id: "h1", op: "StepRun", data: { ok: true }, name: "s1", displayName: "s1", timing: { a: 1 } }],
  extra: "kept",
};
const bodies: Array<[string, unknown]> = [
  ["the SDK's body", valid],
  ["no optional fields", { run_id: "r", fn_id: "f", qi_id: "q", steps: [] }],
  ["null generation", { ...valid, generation_id: null }],
  ["a step without data", { ...valid, steps: [{ id: "h", op: "StepPlanned" }] }],
  ["a step with null data", { ...valid, steps: [{ id: "h", op: "StepRun", data: null }] }],
  ["empty run id", { ...valid, run_id: "" }],
  ["numeric fn id", { ...valid, fn_id: 7 }],
  ["no qi id", { ...valid, qi_id: undefined }],
  ["fractional generation", { ...valid, generation_id: 1.5 }],
  ["unsafe generation", { ...valid, generation_id: 2 ** 60 }],
  ["string generation", { ...valid, generation_id: "3" }],
  ["string start time", { ...valid, request_started_at: "now" }],
  ["steps not a list", { ...valid, steps: {} }],
  ["a step that is a list", { ...valid, steps: [["h", "StepRun"]] }],
  ["a step without op", { ...valid, steps: [{ id: "h" }] }],
  ["a step with an empty id", { ...valid, steps: [{ id: "", op: "StepRun" }] }],
  ["a list", [valid]],
  ["null", null],
  ["a string", "body"],
];

describe("checkpoint body: the hand check on the hot path", () => {
  it("accepts only what the schema accepts, and the SDK's own body", () => {
    for (const [what, body] of bodies) {
      const byHand = plainCheckpointBody(body) !== null;
      const bySchema = checkpointBodySchema.safeParse(body).success;
      if (byHand) expect(bySchema, what).toBe(true);
      if (what === "the SDK's body" || what === "no optional fields" || what.startsWith("a step with")) {
        if (bySchema) expect(byHand, what).toBe(true);
      }
    }
    expect(plainCheckpointBody(valid)).toBe(valid);
  });
});
