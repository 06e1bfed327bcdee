import { shellQuote } from "@/lib/sandbox";

/*
 * Which files are tests, and the shell line that runs some of them. Shared by history mining and the SWE-bench import.
 */

/** A test file by the usual conventions: under test/, tests/, __tests__/, spec/; *.test.* / *.spec.* / *_test.*; test_*.py. */
const TEST_PATH = /(^|\/)(tests?|__tests__|specs?)\/|[._-](test|spec)\.[a-z0-9]+$|(^|\/)test_[^/]*\.py$/i;
/** Documentation: a commit that changes tests and only these is not a code change. */
const DOC_PATH = /\.(md|markdown|txt|rst|adoc)$|(^|\/)(LICENSE|CHANGELOG|AUTHORS)[^/]*$/i;

export const isTestPath = (file: string) => TEST_PATH.test(file);
export const isDocPath = (file: string) => DOC_PATH.test(file);

/**
 * The shell line that runs `tests` (file paths, or pytest-style `file::name` ids). With a template, `{tests}` is replaced
 * by the quoted list. Otherwise by the first file's kind: JavaScript/TypeScript → `node --test`, Python → `python3 -m
 * pytest -q`, shell → `sh` each; several kinds → each kind's line, joined with `&&`.
 */
export function testCommand(tests: string[], template?: string): string {
  const quoted = (list: string[]) => list.map((t) => shellQuote(t)).join(" ");
  if (template) return template.includes("{tests}") ? template.replaceAll("{tests}", quoted(tests)) : `${template} ${quoted(tests)}`;
  const groups = new Map<string, string[]>();
  for (const t of tests) {
    const file = t.split("::")[0]!;
    const kind = /\.py$/.test(file) ? "py" : /\.sh$/.test(file) ? "sh" : "node";
    groups.set(kind, [...(groups.get(kind) ?? []), t]);
  }
  return [...groups]
    .map(([kind, list]) =>
      kind === "py" ? `python3 -m pytest -q ${quoted(list)}` : kind === "sh" ? list.map((f) => `sh ${shellQuote(f)}`).join(" && ") : `node --test ${quoted(list)}`,
    )
    .join(" && ");
}
