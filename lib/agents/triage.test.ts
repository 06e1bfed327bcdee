import { describe, expect, it } from "vitest";
import { triageTask } from "./triage";

const ok = (command: string) => ({ command, exitCode: 0, output: "" });

describe("triage", () => {
  it("only a task's own passing checks make it done with confidence; files add to or take from it", () => {
    const done = triageTask({ taskId: "T1", threshold: 0.8, evidence: { checks: [ok("npm test")], files: [{ path: "a.ts", present: true }] } });
    expect(done).toEqual({ taskId: "T1", confidence: 0.9, evidence: ["`npm test` passes", "a.ts is present"], skipped: true });
    const missing = triageTask({ taskId: "T1", threshold: 0.8, evidence: { checks: [ok("npm test")], files: [{ path: "a.ts", present: false }] } });
    expect(missing).toMatchObject({ confidence: 0.5, skipped: false });
    const failing = triageTask({
      taskId: "T1",
      threshold: 0,
      evidence: { checks: [ok("true"), { command: "npm test", exitCode: 1, output: "line1\nFAIL a.test.ts\n" }], files: [] },
    });
    expect(failing).toMatchObject({ confidence: 0, skipped: false, evidence: ["`true` passes", "`npm test` fails (exit 1): line1 FAIL a.test.ts"] });
    const unproven = triageTask({ taskId: "T1", threshold: 0.2, evidence: { checks: [], files: [{ path: "a.ts", present: true }] } });
    expect(unproven).toMatchObject({ confidence: 0.3, skipped: true, evidence: ["a.ts is present", "no check of its own proves it"] });
    expect(triageTask({ taskId: "T1", threshold: 0, evidence: { checks: [], files: [] } })).toMatchObject({ confidence: 0, skipped: false });
  });
});
