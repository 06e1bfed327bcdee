import { describe, expect, it } from "vitest";
import { gateButtons } from "@/lib/notifications/buttons";

/** A notice's buttons for the fix gate about a stopped implementer (#35 item 5): nothing finished to accept. */
describe("buttons of a fix gate", () => {
  it("about a stopped implementer: retry and cancel, no 'Accept anyway' (the decision route would refuse it)", () => {
    const stuck = gateButtons({ id: "gate_01abcdefghij", kind: "fix", context: { stuck: { reason: "loop" } } });
    expect(stuck.map((b) => b.label)).toEqual(["Retry", "Cancel the run"]);
    expect(stuck.map((b) => b.code)).toEqual(["fr:gate_01abcdefghij", "fc:gate_01abcdefghij"]);
  });

  it("after a failed validation: retry, accept anyway, cancel", () => {
    expect(gateButtons({ id: "gate_01abcdefghij", kind: "fix", context: { report: "failed" } }).map((b) => b.label)).toEqual(["Retry the fix", "Accept anyway", "Cancel the run"]);
  });
});
