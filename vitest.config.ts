import path from "node:path";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { alias: { "@": path.resolve(import.meta.dirname) } },
  test: {
    include: ["lib/**/*.test.ts", "inngest/**/*.test.ts", "app/**/*.test.ts", "tests/**/*.test.ts"],
    environment: "node",
    pool: "forks",
    // Two cores: two test files at a time; integration tests start servers and child processes.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    setupFiles: ["tests/setup.ts"],
  },
});
