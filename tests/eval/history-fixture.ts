import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { git, gitOut } from "@/lib/git/run";

/**
 * A small JavaScript library whose history is a benchmark: built commit by commit (no binary fixture), tests run with
 * `node --test`. Newest first, mining it finds:
 *   break-sum    code + tests, but the other tests fail at the commit        → dropped
 *   add-div      code + tests, its own test fails at the commit              → dropped
 *   add-greet    code + tests, fail at parent, pass at commit                → VALID (demo-scripted: carries greet.js)
 *   refactor     code + tests that already pass at the parent                → dropped
 *   sum-tests    tests only                                                  → dropped
 *   add-clamp    code + tests                                                → VALID (not scripted: the demo cannot)
 *   docs         README only                                                 → dropped
 *   add-mul      code + tests                                                → VALID (demo-scripted: carries mul.js)
 *   start        the root commit                                             → dropped
 * Every hidden test carries HIDDEN_MARKER, so a test can prove it never reached the agent.
 */

export const HIDDEN_MARKER = "HIDDEN-TEST-7f3a";

/** Each node:test file run directly (it exits 1 on a failure): a tenth of `node --test`'s time per file. */
export const FIXTURE_TEST_COMMAND = 'for f in {tests}; do node "$f" || exit 1; done';

const test = (file: string, body: string) =>
  `// ${HIDDEN_MARKER} ${file}\nconst { test } = require("node:test");\nconst assert = require("node:assert");\n${body}\n`;

type Step = { name: string; message: string; files: Record<string, string> };

export const DEMO_MUL = "exports.mul = (a, b) => a * b;\n";
export const DEMO_GREET = 'exports.greet = (name) => `hello, ${name}`;\n';

const STEPS: Step[] = [
  {
    name: "start",
    message: "Start the math library",
    files: {
      "README.md": "# mathlib\n",
      "math.js": "exports.sum = (a, b) => a + b;\n",
      "test/sum.test.js": test("sum", 'const { sum } = require("../math.js");\ntest("sum", () => assert.strictEqual(sum(2, 3), 5));'),
    },
  },
  {
    name: "add-mul",
    message: `Add mul(a, b), the product of two numbers, in mul.js\n\n\`\`\`file:mul.js\n${DEMO_MUL}\`\`\`\n`,
    files: {
      "mul.js": DEMO_MUL,
      "test/mul.test.js": test("mul", 'const { mul } = require("../mul.js");\ntest("mul", () => assert.strictEqual(mul(4, 5), 20));'),
    },
  },
  { name: "docs", message: "Document the library", files: { "README.md": "# mathlib\n\nsum and mul.\n" } },
  {
    name: "add-clamp",
    message: "Add clamp(x, lo, hi) in clamp.js: x limited to the range [lo, hi]",
    files: {
      "clamp.js": "exports.clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));\n",
      "test/clamp.test.js": test("clamp", 'const { clamp } = require("../clamp.js");\ntest("clamp", () => { assert.strictEqual(clamp(5, 0, 3), 3); assert.strictEqual(clamp(-1, 0, 3), 0); });'),
    },
  },
  {
    name: "sum-tests",
    message: "Test sum with negative numbers",
    files: { "test/sum.test.js": test("sum", 'const { sum } = require("../math.js");\ntest("sum", () => { assert.strictEqual(sum(2, 3), 5); assert.strictEqual(sum(-2, 2), 0); });') },
  },
  {
    name: "refactor",
    message: "Name sum's arguments and test it once more",
    files: {
      "math.js": "exports.sum = (left, right) => left + right;\n",
      "test/sum-more.test.js": test("sum-more", 'const { sum } = require("../math.js");\ntest("sum more", () => assert.strictEqual(sum(1, 1), 2));'),
    },
  },
  {
    name: "add-greet",
    message: `Add greet(name) in greet.js, returning "hello, <name>"\n\n\`\`\`file:greet.js\n${DEMO_GREET}\`\`\`\n`,
    files: {
      "greet.js": DEMO_GREET,
      "test/greet.test.js": test("greet", 'const { greet } = require("../greet.js");\ntest("greet", () => assert.strictEqual(greet("ada"), "hello, ada"));'),
    },
  },
  {
    name: "add-div",
    message: "Add div(a, b)",
    files: {
      "div.js": "exports.div = (a, b) => a * b;\n",
      "test/div.test.js": test("div", 'const { div } = require("../div.js");\ntest("div", () => assert.strictEqual(div(6, 3), 2));'),
    },
  },
  {
    name: "break-sum",
    message: "Add neg(x), and break sum on the way",
    files: {
      "math.js": "exports.sum = (left, right) => left - right;\nexports.neg = (x) => -x;\n",
      "test/neg.test.js": test("neg", 'const { neg } = require("../math.js");\ntest("neg", () => assert.strictEqual(neg(2), -2));'),
    },
  },
];

export type HistoryFixture = { dir: string; commits: Record<string, string> };

/** Build the fixture repository (branch main), one commit a day from 2024-01-01. */
export async function buildHistoryFixture(): Promise<HistoryFixture> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gh-eval-history-"));
  await git(dir, ["init", "-q", "-b", "main"]);
  const commits: Record<string, string> = {};
  for (const [i, step] of STEPS.entries()) {
    for (const [file, content] of Object.entries(step.files)) {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), content);
    }
    const date = `2024-01-${String(i + 1).padStart(2, "0")}T12:00:00Z`;
    await git(dir, ["add", "-A"]);
    await git(dir, ["commit", "-q", "-m", step.message], { env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } });
    commits[step.name] = await gitOut(dir, ["rev-parse", "HEAD"]);
  }
  return { dir, commits };
}
