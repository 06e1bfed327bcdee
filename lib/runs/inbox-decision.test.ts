import { describe, expect, it } from "vitest";
import { inboxDecision } from "./inbox-decision";

const gate = (status: string, decision: string | null = null, gateKind = "plan", runStatus = "running") =>
  inboxDecision({ kind: "gate", gateKind, status, decision, response: null, runStatus });
const question = (status: string, response: unknown = null, runStatus = "running") =>
  inboxDecision({ kind: "question", gateKind: null, status, decision: null, response, runStatus });

describe("inboxDecision: what was decided on a done inbox row", () => {
  it("says how a gate was decided, so two plan-gate rows of one run read apart", () => {
    expect(gate("approved", "approve")).toBe("Approved");
    expect(gate("rejected", "reject")).toBe("Rejected: sent back to the planner");
    expect(gate("decided", "retry", "fix")).toBe("Retry the fixes");
    expect(gate("approved", "raise", "budget")).toBe("Budget raised");
    expect(gate("cancelled")).toBe("Cancelled with the run");
  });

  it("quotes a question's answer (a choice, a list, a file) or says it was skipped", () => {
    expect(question("answered", "French")).toBe("Answered: French");
    expect(question("answered", ["a", "b"])).toBe("Answered: a, b");
    expect(question("answered", { fileName: "spec.md", contentBase64: "" })).toBe("Answered: file spec.md");
    expect(question("ignored")).toBe("Skipped: the run went on with its best judgement");
  });

  it("an item whose run ended before anyone decided it says so; an open one has nothing to say", () => {
    expect(gate("pending", null, "plan", "cancelled")).toBe("Not decided: the run was cancelled");
    expect(question("pending", null, "completed")).toBe("Not decided: the run completed");
    expect(gate("pending")).toBeNull();
  });
});
