import { parsePatch } from "diff";

/*
 * The branch diff as pairs of documents for VS Code's diff editor. The API returns a unified diff (GET
 * /api/runs/:id/diff), not whole files, so each side holds the lines the hunks show (context and changes), with a
 * marker line between hunks saying where the next one starts. That is what `git diff` shows, laid out side by side.
 */

export type DiffFile = { path: string; status: "added" | "deleted" | "modified" | "renamed"; before: string; after: string };

const stripPrefix = (name: string | undefined) => (name ?? "").replace(/^[ab]\//, "");

export function diffDocuments({ diff }: { diff: string }): DiffFile[] {
  if (!diff.trim()) return [];
  return parsePatch(diff).map((file) => {
    const oldName = stripPrefix(file.oldFileName);
    const newName = stripPrefix(file.newFileName);
    const status = oldName === "/dev/null" ? "added" : newName === "/dev/null" ? "deleted" : oldName !== newName ? "renamed" : "modified";
    const before: string[] = [];
    const after: string[] = [];
    file.hunks.forEach((hunk, i) => {
      if (i > 0 || hunk.oldStart > 1 || hunk.newStart > 1) {
        before.push(`⋯ line ${hunk.oldStart}`);
        after.push(`⋯ line ${hunk.newStart}`);
      }
      for (const line of hunk.lines) {
        if (line.startsWith("\\")) continue; // "\ No newline at end of file"
        const text = line.slice(1);
        if (line[0] !== "+") before.push(text);
        if (line[0] !== "-") after.push(text);
      }
    });
    return {
      path: status === "deleted" ? oldName : newName,
      status,
      before: status === "added" ? "" : `${before.join("\n")}\n`,
      after: status === "deleted" ? "" : `${after.join("\n")}\n`,
    };
  });
}
