import { StringDecoder } from "node:string_decoder";
import { AppError } from "@/lib/errors";
import { DIFF_SAFE, gitEnv, SAFE_CONFIG, type WorktreeLocation } from "./run";
import { streamChild } from "./spawner";

/**
 * How much of a diff the server reads. A command can write a file of hundreds of megabytes; read whole, its diff held
 * the server (a 200 MB file: health 4–7 s, 2.6 GB for six viewers). Mutable so tests can use small files.
 * - fileBytes: a changed file larger than this is left out of text diffs (git treats it as binary and never diffs
 *   it), with a note saying so and how large it is;
 * - totalBytes: a text diff is cut here (git is stopped) and says so;
 * - scanFileBytes / scanTotalBytes: what the secret scan reads (lib/runs/secret-scan.ts): files up to scanFileBytes
 *   are read in full, as a stream; a larger one, and everything past scanTotalBytes, cannot be checked and is
 *   treated like a file holding a secret (never committed).
 */
export const DIFF_LIMITS = {
  fileBytes: 1024 * 1024,
  totalBytes: 2 * 1024 * 1024,
  scanFileBytes: 64 * 1024 * 1024,
  scanTotalBytes: 1024 * 1024 * 1024,
};

/** Lines longer than this reach an onLine reader in pieces (overlapping by LINE_OVERLAP, so a key is never split). */
export const MAX_LINE_PIECE = 256 * 1024;
const LINE_OVERLAP = 4096;

export type DiffOptions = {
  /** Files larger than this are left out (default DIFF_LIMITS.fileBytes), each with a note. */
  maxFileBytes?: number;
  /** Stop reading past this many bytes of git's output: git is stopped, the diff ends with a note (default DIFF_LIMITS.totalBytes; with onLine, no cap). */
  maxBytes?: number;
  /**
   * Receives the diff line by line as git writes it, then the notes; nothing is kept in memory and the diff returned
   * is "". A line longer than MAX_LINE_PIECE comes in overlapping pieces, each after the first marked `continued`.
   */
  onLine?: (line: string, continued: boolean) => void;
  /** Called once at the end with what was left out (streamed or not). */
  onEnd?: (result: BoundedDiff) => void;
};

export type BoundedDiff = {
  diff: string;
  /** The diff was cut at maxBytes. */
  truncated: boolean;
  /** Where it was cut (bytes), when it was. */
  cutAt: number | null;
  /** "<path>: 200 MB, left out of the diff", one per file left out for its size, and the cut when there was one. */
  notes: string[];
  /** The files left out for their size. */
  leftOut: Array<{ path: string; bytes: number }>;
};

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 * 1024) return `${Math.round(bytes / (1024 * 1024 * 102.4)) / 10} GB`;
  if (bytes >= 1024 * 1024) return `${Math.round(bytes / (1024 * 102.4)) / 10} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 102.4) / 10} KB`;
  return `${bytes} bytes`;
}

/** The b-side path of a `diff --git a/<x> b/<y>` header (C-quoted names unquoted). */
export function headerPath(header: string): string {
  const rest = header.slice("diff --git ".length);
  if (rest.endsWith('"')) {
    const open = rest.lastIndexOf(' "');
    return unquote(rest.slice(open + 1)).replace(/^b\//, "");
  }
  // Unquoted: "a/P b/P" for a change, "a/P b/Q" for a rename (then the last " b/" is the best guess).
  const half = (rest.length - 1) / 2;
  if (Number.isInteger(half) && rest.slice(2, half) === rest.slice(half + 3)) return rest.slice(half + 3);
  return rest.slice(rest.lastIndexOf(" b/") + 3);
}

/** Git's C quoting of a name with a tab, newline, quote, backslash or (with octal escapes) other bytes. */
export function unquote(name: string): string {
  if (!name.startsWith('"')) return name;
  const bytes: number[] = [];
  const escapes: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, "\\": 92 };
  for (let i = 1; i < name.length && name[i] !== '"'; i++) {
    if (name[i] !== "\\") {
      bytes.push(...Buffer.from(name[i]!, "utf8"));
    } else if (/[0-7]/.test(name[i + 1] ?? "")) {
      bytes.push(parseInt(name.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(escapes[name[i + 1]!] ?? name.charCodeAt(i + 1));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/**
 * Reads a diff as it arrives (feed), keeping it up to `cap` bytes or handing it line by line to `onLine`, and notes the
 * files git left out for their size (end). Shared by the host's diff and E2B's.
 */
export class DiffReader {
  private kept: string[] = [];
  private read = 0;
  private pending = "";
  private pendingContinued = false;
  private file = "";
  private leftOut: string[] = [];
  truncated = false;

  constructor(
    private readonly o: { cap: number; maxFileBytes: number; sizeOf: (path: string) => Promise<number | null> } & Pick<DiffOptions, "onLine" | "onEnd">,
  ) {}

  /** Take a chunk (text: keep it, up to the cap); false once the cap is reached (the rest is not wanted: stop the producer). */
  feed(chunk: string): boolean {
    if (this.truncated) return false;
    const bytes = Buffer.byteLength(chunk);
    if (this.read + bytes > this.o.cap) {
      const part = Buffer.from(chunk).subarray(0, this.o.cap - this.read).toString("utf8");
      this.truncated = true;
      this.read = this.o.cap;
      // Never end in the middle of a line: the cut is at the last whole line.
      this.take(part.slice(0, part.lastIndexOf("\n") + 1));
      this.pending = "";
      return false;
    }
    this.read += bytes;
    this.take(chunk);
    return true;
  }

  private take(chunk: string) {
    this.pending += chunk;
    let at: number;
    while ((at = this.pending.indexOf("\n")) !== -1) {
      this.line(this.pending.slice(0, at), this.pendingContinued);
      this.pending = this.pending.slice(at + 1);
      this.pendingContinued = false;
    }
    // A long line comes in pieces, the last LINE_OVERLAP characters of one repeated at the start of the next.
    while (this.o.onLine && this.pending.length > MAX_LINE_PIECE) {
      this.line(this.pending.slice(0, MAX_LINE_PIECE), this.pendingContinued);
      this.pending = this.pending.slice(MAX_LINE_PIECE - LINE_OVERLAP);
      this.pendingContinued = true;
    }
  }

  private line(text: string, continued: boolean) {
    if (!continued) {
      if (text.startsWith("diff --git ")) this.file = headerPath(text);
      else if (/^Binary files .* differ$/.test(text)) this.leftOut.push(this.file);
    }
    if (this.o.onLine) this.o.onLine(text, continued);
    else this.kept.push(text);
  }

  /** The diff read (empty with onLine), and its notes. */
  async end(): Promise<BoundedDiff> {
    if (this.pending) this.line(this.pending, this.pendingContinued);
    this.pending = "";
    const notes: string[] = [];
    const leftOut: BoundedDiff["leftOut"] = [];
    for (const p of this.leftOut) {
      const bytes = await this.o.sizeOf(p).catch(() => null);
      if (bytes === null || bytes <= this.o.maxFileBytes) continue;
      leftOut.push({ path: p, bytes });
      notes.push(`${p}: ${formatBytes(bytes)}, left out of the diff`);
    }
    if (this.truncated) notes.push(`the diff was cut at ${formatBytes(this.o.cap)}: the files after this point are left out`);
    const diff = this.kept.length ? `${this.kept.join("\n")}\n` : "";
    const result = { diff, truncated: this.truncated, cutAt: this.truncated ? this.o.cap : null, notes, leftOut };
    this.o.onEnd?.(result);
    return result;
  }
}

/**
 * `git diff <args>` read as a stream, never whole: files over maxFileBytes are left out (git's core.bigFileThreshold
 * makes it treat them as binary, so it does not even diff them) and named in a note with their size (from `sizeOf`,
 * the file's size on the new side, or null when it is gone); past maxBytes git is stopped and the diff says it was cut.
 * Throws AppError internal:git when git fails, unless it was stopped at the cap.
 */
export async function boundedDiff({
  cwd,
  args,
  worktree,
  sizeOf,
  maxFileBytes = DIFF_LIMITS.fileBytes,
  maxBytes,
  onLine,
  onEnd,
}: DiffOptions & {
  cwd: string;
  /** What to diff: revisions, then `--` and pathspecs. */
  args: string[];
  worktree?: WorktreeLocation;
  sizeOf: (path: string) => Promise<number | null>;
}): Promise<BoundedDiff> {
  const cap = maxBytes ?? (onLine ? Infinity : DIFF_LIMITS.totalBytes);
  const location = worktree ? ["--git-dir", worktree.gitDir, "--work-tree", worktree.workTree] : [];
  const argv = [...SAFE_CONFIG, ...bigFileConfig(maxFileBytes), ...location, "diff", "--no-color", ...DIFF_SAFE, ...args];
  const reader = new DiffReader({ cap, maxFileBytes, sizeOf, onLine, onEnd });
  // Through the git helper process (./spawner.ts), streamed: a spawn from the server blocks its thread far longer.
  const decoder = new StringDecoder("utf8");
  let ended: Awaited<ReturnType<typeof streamChild>>;
  try {
    ended = await streamChild({ file: "git", args: argv, cwd, env: gitEnv() }, (chunk) => reader.feed(decoder.write(chunk)));
  } catch (error) {
    throw new AppError("internal:git", `git could not be started: ${(error as Error).message}`, { cause: error });
  }
  if (ended.code !== 0 && !reader.truncated) {
    throw new AppError("internal:git", `git diff failed (exit ${ended.code}): ${ended.stderr.toString("utf8").trim().slice(0, 2000)}`);
  }
  if (!reader.truncated) {
    const rest = decoder.end();
    if (rest) reader.feed(rest);
  }
  return reader.end();
}

/** git's own limit for diffing a file: above it the file is treated as binary (not diffed, not even read for it). */
export function bigFileConfig(maxFileBytes: number): string[] {
  return ["-c", `core.bigFileThreshold=${Math.max(1, Math.floor(maxFileBytes))}`];
}

/** The diff with its notes as trailing `[note]` lines (what a model or a log reads). */
export function withNotes({ diff, notes }: Pick<BoundedDiff, "diff" | "notes">): string {
  if (!notes.length) return diff;
  return `${diff}${diff && !diff.endsWith("\n") ? "\n" : ""}${notes.map((n) => `[${n}]`).join("\n")}\n`;
}
