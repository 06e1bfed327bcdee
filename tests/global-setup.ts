import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/**
 * Vitest's global setup: one temporary directory for the whole run, made the TMPDIR of every test worker (and of every
 * process a test starts: servers, git, the CLI), and removed when the run ends. Tests make their repositories, data
 * directories and homes under os.tmpdir() and many leave them there; without this one `npm test` left about a thousand
 * directories and 1 GB in /tmp, every run. GATEHOUSE_TEST_KEEP_TMP=1 keeps it (its path is printed) to look into.
 */
export default function setup(): () => void {
  // Vitest runs the global setup once per project, in one process: the first makes the directory, the others use it
  // (nesting them would make paths too long for a Unix socket, which Chromium puts under TMPDIR).
  if (process.env.GATEHOUSE_TEST_TMPDIR) return () => undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-vitest-"));
  process.env.GATEHOUSE_TEST_TMPDIR = dir;
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  return () => {
    delete process.env.GATEHOUSE_TEST_TMPDIR;
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    if (process.env.GATEHOUSE_TEST_KEEP_TMP) {
      console.log(`kept the tests' temporary files in ${dir}`);
      return;
    }
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  };
}
