import path from "node:path";
import { PathEscapeError } from "@/lib/sandbox/types";

/**
 * Confine a path from the model to the workspace before it reaches the sandbox (which checks again, including symlinks).
 * Absolute paths, `~`, drive letters and anything that climbs out with `..` are refused with an error the model sees.
 */
export function workspacePath(requested: string): string {
  const raw = String(requested ?? "").trim();
  if (raw.includes("\0")) throw new PathEscapeError(raw.replace(/\0/g, "\\0"));
  if (raw === "" || raw === ".") return ".";
  if (raw.startsWith("/") || raw.startsWith("\\") || raw.startsWith("~") || /^[A-Za-z]:/.test(raw)) {
    throw new PathEscapeError(raw);
  }
  const normalized = path.posix.normalize(raw.replace(/\\/g, "/"));
  if (normalized === ".." || normalized.startsWith("../")) throw new PathEscapeError(raw);
  return normalized.replace(/\/+$/, "") || ".";
}

/** Files named in a unified diff (`diff --git a/x b/x`, or `+++ b/x` for plain diffs). */
export function changedFilesOfDiff(diff: string): string[] {
  const files = new Set<string>();
  for (const line of diff.split("\n")) {
    const git = /^diff --git a\/(.+?) b\/(.+)$/.exec(line);
    if (git) {
      files.add(git[2]!);
      continue;
    }
    const plus = /^\+\+\+ b\/(.+)$/.exec(line);
    if (plus) files.add(plus[1]!.trim());
  }
  return [...files].sort();
}

/** Whether a file is covered by a plan's scope entry: the exact path, a folder (`src/` or `src`), or a `*` glob. */
export function inScope(file: string, scope: string[]): boolean {
  return scope.some((entry) => {
    const e = entry.trim().replace(/^\.\//, "");
    if (!e) return false;
    if (e.includes("*")) {
      const re = new RegExp(
        `^${e
          .split(/(\*\*\/?|\*)/)
          .map((part) => (part.startsWith("**") ? ".*" : part === "*" ? "[^/]*" : part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")))
          .join("")}$`,
      );
      return re.test(file);
    }
    const folder = e.replace(/\/+$/, "");
    return file === folder || file.startsWith(`${folder}/`);
  });
}
