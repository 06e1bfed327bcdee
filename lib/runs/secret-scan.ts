import { DIFF_LIMITS, formatBytes, headerPath, unquote } from "@/lib/git/diff";
import { holdsSecret } from "@/lib/redact";
import type { Sandbox } from "@/lib/sandbox/types";

/**
 * What the secret scan found in the workspace's changes: files whose added lines hold a secret, and files it could
 * not check. A file it could not check is treated like one holding a secret (never committed), so a secret cannot
 * pass by being large: nothing reaches the branch unread.
 */
export type SecretScan = { files: string[]; unchecked: Array<{ path: string; why: string }> };

/**
 * Scan the added lines of the workspace's diff for secrets (a configured one, a fragment or an encoding of one, or a
 * key shape), reading git's output as a stream — never the whole diff in memory (issue #29, finding 5):
 * - a file up to DIFF_LIMITS.scanFileBytes is read in full (a very long line in overlapping pieces);
 * - a larger file is not read at all: it is "unchecked" (git reports it as binary, its size comes from the sandbox);
 * - past DIFF_LIMITS.scanTotalBytes of diff the reading stops, and every file not read to its end is "unchecked".
 * Binary files are not scanned (as before: their content is not text a key shape can be matched in).
 */
export async function scanChangesForSecrets(sandbox: Pick<Sandbox, "diff">): Promise<SecretScan> {
  const files = new Set<string>();
  const seen: string[] = [];
  const unchecked: SecretScan["unchecked"] = [];
  let file = "";
  let inHunk = false;
  let added = false;
  let cutAt: number | null = null;
  const onLine = (line: string, continued = false) => {
    if (!continued) {
      added = false;
      if (line.startsWith("diff --git ")) {
        file = headerPath(line);
        seen.push(file);
        inHunk = false;
        return;
      }
      if (!inHunk) {
        // `+++ b/<path>` names the file exactly (the header can be ambiguous for a rename with spaces).
        if (line.startsWith("+++ ") && line !== "+++ /dev/null") file = unquote(line.slice(4)).replace(/^b\//, "");
        if (line.startsWith("@@")) inHunk = true;
        return;
      }
      if (!line.startsWith("+")) return;
      added = true;
    } else if (!added) return;
    // A PEM block spans lines: its header alone is enough to stop the commit.
    if (holdsSecret(continued ? line : line.slice(1))) files.add(file);
  };
  const whole = await sandbox.diff({
    maxFileBytes: DIFF_LIMITS.scanFileBytes,
    maxBytes: DIFF_LIMITS.scanTotalBytes,
    onLine,
    onEnd: (end) => {
      cutAt = end.cutAt;
      for (const big of end.leftOut) {
        unchecked.push({ path: big.path, why: `${formatBytes(big.bytes)}: too large to check for secrets (the limit is ${formatBytes(DIFF_LIMITS.scanFileBytes)})` });
      }
    },
  });
  // A sandbox that cannot stream returns the diff whole instead.
  for (const line of whole ? whole.split("\n") : []) onLine(line);
  if (cutAt !== null) {
    // The files after the cut (and the one cut): named by a diff that diffs nothing (every file counts as too big).
    const read = new Set(seen.slice(0, -1));
    const all: string[] = [];
    await sandbox.diff({ maxFileBytes: 1, onLine: (line, continued) => void (!continued && line.startsWith("diff --git ") && all.push(headerPath(line))) });
    const why = `the changes are over ${formatBytes(cutAt)} in all: too large to check for secrets`;
    for (const path of all) if (!read.has(path) && !unchecked.some((u) => u.path === path)) unchecked.push({ path, why });
  }
  return { files: [...files].filter((f) => !unchecked.some((u) => u.path === f)), unchecked };
}

/** Every path the scan says must stay out of a commit. */
export function withheldPaths(scan: SecretScan): string[] {
  return [...scan.files, ...scan.unchecked.map((u) => u.path)];
}

/** The same, each with why when it was not checked ("big.bin (200 MB: too large to check for secrets …)"). */
export function describeLeaks(scan: SecretScan): string[] {
  return [...scan.files, ...scan.unchecked.map((u) => `${u.path} (${u.why})`)];
}
