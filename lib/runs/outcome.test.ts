import { describe, expect, it } from "vitest";
import { runOutcome, statusLabel } from "./outcome";

describe("runOutcome", () => {
  it("tells a clean pass from a run accepted after failed validation", () => {
    expect(runOutcome({ status: "completed", lastValidation: "passed" })).toBe("validated");
    expect(runOutcome({ status: "completed", lastValidation: "failed" })).toBe("accepted_failed_validation");
    expect(runOutcome({ status: "completed", lastValidation: null })).toBe("accepted_failed_validation");
  });

  it("is null while the run is not finished, and the status when it failed or was cancelled", () => {
    expect(runOutcome({ status: "running", lastValidation: "failed" })).toBeNull();
    expect(runOutcome({ status: "cancelled", lastValidation: null })).toBe("cancelled");
  });
});

describe("statusLabel", () => {
  it("names the accepted-after-failure outcome instead of a plain completed", () => {
    expect(statusLabel({ status: "completed", outcome: "accepted_failed_validation" })).toBe("accepted · validation failed");
    expect(statusLabel({ status: "completed", outcome: "validated" })).toBe("completed");
    expect(statusLabel({ status: "awaiting_fix_decision", outcome: null })).toBe("awaiting fix decision");
  });
});
