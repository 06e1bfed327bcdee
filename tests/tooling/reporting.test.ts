import { afterEach, describe, expect, it, vi } from "vitest";
import type { TestModule } from "vitest/node";
import { keepLog, PlainSummaryReporter } from "../reporting";

/** Issue 32, finding 16: `npm test` leaves out the errors tests provoke on purpose and ends in plain words. */
describe("test output", () => {
  afterEach(() => vi.restoreAllMocks());

  it("leaves out the known expected log lines, keeps everything else, and keeps all with GATEHOUSE_TEST_LOGS=all", () => {
    expect(keepLog("Inngest step error\nError: flaky\n    at x", false)).toBe(false);
    expect(keepLog('{"t":"2026-01-01","level":"warn","msg":"webhook delivery ntf_1 failed: HTTP 503"}', false)).toBe(false);
    expect(keepLog("[auth] JWTSessionError: Read more at https://errors.authjs.dev#jwtsessionerror", false)).toBe(false);
    expect(keepLog("TypeError: Cannot read properties of undefined", false)).toBe(true);
    expect(keepLog('{"level":"error","msg":"run-workflow crashed"}', false)).toBe(true);
    expect(keepLog("Inngest step error\nError: flaky", true)).toBe(true);
  });

  it("prints a failed test's held-back lines after all, under its name, and drops a passed test's", () => {
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    keepLog("Inngest step error\nError: the real cause", false, { id: "t-failed" });
    keepLog("Inngest step error\nError: flaky", false, { id: "t-passed" });
    const reporter = new PlainSummaryReporter();
    reporter.onTestCaseResult({ id: "t-passed", fullName: "passes", result: () => ({ state: "passed" }) } as never);
    expect(err).not.toHaveBeenCalled();
    reporter.onTestCaseResult({ id: "t-failed", fullName: "breaks", result: () => ({ state: "failed" }) } as never);
    expect(err.mock.calls[0]![0]).toContain('failed test "breaks"');
    expect(err.mock.calls[0]![0]).toContain("Error: the real cause");
  });

  const fakeModule = (id: string, tests: Array<[string, "passed" | "failed" | "skipped"]>, state = "passed") =>
    ({
      moduleId: `${process.cwd()}/${id}`,
      state: () => state,
      children: { allTests: function* () { for (const [fullName, s] of tests) yield { fullName, result: () => ({ state: s }) }; } },
    }) as unknown as TestModule;

  it("ends a green run with PASSED and the count", () => {
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    new PlainSummaryReporter().onTestRunEnd([fakeModule("tests/a.test.ts", [["a works", "passed"], ["b works", "passed"], ["c later", "skipped"]])], []);
    expect(out.mock.calls.at(-1)![0]).toMatch(/PASSED: all 2 tests passed \(1 skipped\)\.$/);
  });

  it("ends a red run with FAILED and names each failed test and a file that failed to load", () => {
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    new PlainSummaryReporter().onTestRunEnd(
      [fakeModule("tests/a.test.ts", [["a works", "passed"], ["b breaks", "failed"]], "failed"), fakeModule("tests/b.test.ts", [], "failed")],
      [],
    );
    const text = out.mock.calls.at(-1)![0] as string;
    expect(text).toContain("FAILED: 2 test(s) failed, 1 passed:");
    expect(text).toContain("  ✗ tests/a.test.ts > b breaks");
    expect(text).toContain("  ✗ tests/b.test.ts (the file itself failed)");
  });
});
