import fs from "node:fs/promises";
import path from "node:path";
import { PathEscapeError } from "./types";

/** True when `candidate` is `root` or lies below it (both absolute, normalised). */
export function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/**
 * Resolve a workspace-relative path to an absolute one inside `root` (which must already be a realpath), or throw
 * PathEscapeError. Refuses absolute paths, any `..` segment, the `.git` entry, NUL bytes, and any existing prefix whose
 * realpath (symlinks followed) leaves the root — so a symlink planted in the tree cannot be used to reach outside.
 */
export async function resolveInside(root: string, requested: string): Promise<string> {
  if (typeof requested !== "string" || requested.includes("\0")) throw new PathEscapeError(String(requested));
  const rel = requested.trim() === "" ? "." : requested;
  if (path.isAbsolute(rel) || /^[A-Za-z]:/.test(rel) || rel.startsWith("~")) throw new PathEscapeError(requested);
  const segments = rel.split(/[\\/]+/).filter((s) => s !== "" && s !== ".");
  if (segments.includes("..")) throw new PathEscapeError(requested);
  // The worktree's `.git` file points at the repository's git directory; rewriting it would redirect git itself.
  if (segments[0] === ".git") throw new PathEscapeError(requested);
  const absolute = path.resolve(root, ...segments);
  if (!isInside(root, absolute)) throw new PathEscapeError(requested);

  // Walk up to the longest existing prefix and check where it really points.
  let probe = absolute;
  for (;;) {
    try {
      const real = await fs.realpath(probe);
      if (!isInside(root, real)) throw new PathEscapeError(requested);
      break;
    } catch (error) {
      if (error instanceof PathEscapeError) throw error;
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      // A dangling symlink: its target cannot be checked, so it is refused.
      const stat = await fs.lstat(probe).catch(() => null);
      if (stat?.isSymbolicLink()) throw new PathEscapeError(requested);
      if (probe === root) break;
      probe = path.dirname(probe);
    }
  }
  return absolute;
}

/** Workspace-relative POSIX form of an absolute path inside root. */
export function toRelative(root: string, absolute: string): string {
  return path.relative(root, absolute).split(path.sep).join("/") || ".";
}
