import { headerPath } from "@/lib/git/diff";
import { redact } from "@/lib/redact";
import type { Sandbox } from "@/lib/sandbox/types";

export type ReviewDiff = {
  /** The diff as a reviewer (a model) reads it: at most maxChars of it, redacted, then the notes of what was left out. */
  text: string;
  /** Every file the diff names, also those past the cut (redacted). */
  changedFiles: string[];
  deletedFiles: string[];
};

/**
 * The workspace's diff for validation, read as a stream: the text is kept up to `maxChars` (the rest is cut, and says
 * so), while every changed and deleted file is still collected, so scope checks see files past the cut. Files over the
 * diff's size limit are named in a note instead of shown (lib/git/diff.ts).
 */
export async function reviewDiff(sandbox: Pick<Sandbox, "diff">, { maxChars }: { maxChars: number }): Promise<ReviewDiff> {
  const files = new Set<string>();
  const deleted = new Set<string>();
  const kept: string[] = [];
  let size = 0;
  let cut = false;
  let file = "";
  let notes: string[] = [];
  const onLine = (line: string, continued = false) => {
    if (!continued && line.startsWith("diff --git ")) {
      file = headerPath(line);
      files.add(file);
    } else if (!continued && line.startsWith("deleted file mode")) deleted.add(file);
    if (cut || continued) return;
    if (size + line.length + 1 > maxChars) cut = true;
    else {
      kept.push(line);
      size += line.length + 1;
    }
  };
  // A sandbox that cannot stream returns the diff whole instead.
  const whole = await sandbox.diff({ onLine, onEnd: (end) => (notes = end.notes) });
  for (const line of whole ? whole.replace(/\n$/, "").split("\n") : []) onLine(line);
  const body = redact(kept.join("\n"));
  const trailer = [...(cut ? [`[… diff cut at ${maxChars} characters]`] : []), ...notes.map((n) => `[${redact(n)}]`)];
  return {
    text: [body, ...trailer].filter(Boolean).join("\n"),
    changedFiles: [...files].map((f) => redact(f)).sort(),
    deletedFiles: [...deleted].map((f) => redact(f)),
  };
}
