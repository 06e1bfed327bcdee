import type { Reporter, TestCase, TestModule, TestSuite } from "vitest/node";

/*
 * What `npm test` prints (issue 32, finding 16). Many tests fail things on purpose — a step that throws to be retried, a
 * webhook receiver answering 503, a forged session cookie — and the code under test logs each one, as it should in
 * production. Those known, expected lines are held back (GATEHOUSE_TEST_LOGS=all prints them as they come); anything
 * else prints as usual. A test that fails gets its held-back lines printed after all, under its name: nothing that
 * helps explain a real failure is lost. Whether a test passed is never read from a log.
 */

/** Log lines that tests provoke on purpose, by how they start or what they say. */
export const EXPECTED_LOGS: Array<{ what: string; pattern: RegExp }> = [
  { what: "a step failing on purpose, to be retried (Inngest SDK)", pattern: /^Inngest step error\n/ },
  { what: "a function failing on purpose after its retries (Inngest SDK)", pattern: /^Inngest function error\n/ },
  { what: "a notification receiver refusing on purpose", pattern: /"msg":"[^"]*delivery[^"]* failed: HTTP \d{3}/ },
  { what: "a forged or foreign session cookie (Auth.js)", pattern: /^\[auth\] JWTSessionError\b/ },
  { what: "the AI SDK's warnings about scripted test models", pattern: /^AI SDK Warning/ },
  { what: "the loopback OIDC provider's development-mode warnings", pattern: /^oidc-provider WARNING\b/ },
];

let hidden = 0;
/** Held-back lines by the test (or file) that logged them, until it is known whether it passed. */
const held = new Map<string, string[]>();

/** vitest's onConsoleLog: false holds the line back. */
export function keepLog(log: string, showAll: boolean, entity?: { id: string }): boolean {
  if (showAll) return true;
  if (EXPECTED_LOGS.some((e) => e.pattern.test(log))) {
    hidden += 1;
    const key = entity?.id ?? "";
    held.set(key, [...(held.get(key) ?? []), log]);
    return false;
  }
  return true;
}

function release(key: string, name: string, failed: boolean) {
  const lines = held.get(key);
  held.delete(key);
  if (!failed || !lines?.length) return;
  hidden -= lines.length;
  console.error(`\nLog lines of the failed ${name} that usually mean nothing (shown because it failed):\n${lines.join("\n")}`);
}

/** The last lines of a run, in plain words: how many passed, failed and were skipped, and which failed. */
export class PlainSummaryReporter implements Reporter {
  onTestCaseResult(test: TestCase) {
    release(test.id, `test "${test.fullName}"`, test.result().state === "failed");
  }

  onTestSuiteResult(suite: TestSuite) {
    release(suite.id, `suite "${suite.fullName}"`, suite.state() === "failed");
  }

  onTestModuleEnd(module: TestModule) {
    release(module.id, `file ${module.moduleId}`, module.state() === "failed");
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    let passed = 0;
    let skipped = 0;
    const failed: string[] = [];
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed += 1;
        else if (state === "failed") failed.push(`${module.moduleId.replace(`${process.cwd()}/`, "")} > ${test.fullName}`);
        else skipped += 1;
      }
      // A file that failed to load has no tests to count, only its own error.
      if (module.state() === "failed" && ![...module.children.allTests()].some((t) => t.result().state === "failed")) {
        failed.push(`${module.moduleId.replace(`${process.cwd()}/`, "")} (the file itself failed)`);
      }
    }
    const lines = [""];
    if (hidden > 0) lines.push(`${hidden} expected log line(s) from tests that fail things on purpose were left out (GATEHOUSE_TEST_LOGS=all shows them).`);
    const ok = failed.length === 0 && unhandledErrors.length === 0;
    lines.push(
      ok
        ? `PASSED: all ${passed} tests passed${skipped ? ` (${skipped} skipped)` : ""}.`
        : `FAILED: ${failed.length} test(s) failed, ${passed} passed${skipped ? `, ${skipped} skipped` : ""}${unhandledErrors.length ? `, ${unhandledErrors.length} unhandled error(s)` : ""}:`,
    );
    for (const name of failed) lines.push(`  ✗ ${name}`);
    console.log(lines.join("\n"));
  }
}
