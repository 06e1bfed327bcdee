import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

describe("the tests' temporary directory (tests/global-setup.ts)", () => {
  it("is one directory of this run, under the system's, so the run's leftovers go when it ends", () => {
    const dir = os.tmpdir();
    expect(path.basename(dir)).toMatch(/^gatehouse-vitest-/);
    // One level, whatever the number of projects: Chromium's socket path under it must stay short.
    expect(path.basename(path.dirname(dir))).not.toMatch(/^gatehouse-vitest-/);
    expect(process.env.TMPDIR).toBe(dir);
  });
});
