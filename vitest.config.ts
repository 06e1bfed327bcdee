import path from "node:path";
import { defineConfig } from "vitest/config";
import { keepLog, PlainSummaryReporter } from "./tests/reporting";

const all = ["lib/**/*.test.ts", "inngest/**/*.test.ts", "app/**/*.test.ts", "tests/**/*.test.ts"];
const workflow = ["tests/workflow/**/*.test.ts"];

export default defineConfig({
  resolve: { alias: { "@": path.resolve(import.meta.dirname) } },
  test: {
    environment: "node",
    pool: "forks",
    // Two cores: two test files at a time; integration tests start servers and child processes.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    setupFiles: ["tests/setup.ts"],
    // Expected log lines of tests that fail things on purpose are left out; the run ends with a plain PASSED / FAILED line.
    onConsoleLog: (log, _type, entity) => keepLog(log, process.env.GATEHOUSE_TEST_LOGS === "all", entity),
    reporters: ["default", new PlainSummaryReporter()],
    // One TMPDIR for the run, removed at its end (tests/global-setup.ts).
    globalSetup: ["tests/global-setup.ts"],
    projects: [
      // The run's workflow scenarios run under Inngest Cloud's semantics (no wait look-back, Cloud's limits), so what
      // passes here is what holds in production; see GATEHOUSE_EXECUTOR_STRICT in the README.
      { extends: true, test: { name: "workflow (strict: cloud)", include: workflow, env: { GATEHOUSE_EXECUTOR_STRICT: "cloud" } } },
      { extends: true, test: { name: "unit and integration", include: all, exclude: workflow } },
    ],
  },
});
