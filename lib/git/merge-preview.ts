import { git, resolveCommit } from "./run";

export type LandingFile = { path: string; added: number | null; removed: number | null };

export type MergePreview =
  | { status: "ready"; files: LandingFile[] }
  | { status: "up_to_date"; files: [] }
  | { status: "conflict"; files: LandingFile[]; reason: string }
  | { status: "missing"; files: []; reason: string };

/**
 * What squashMerge would land on the base branch now, file by file: the same three-way tree (`git merge-tree`) compared
 * with the base's tip, so the list includes everything the squash commit will hold (the run's .autonomous/ records too).
 * Changes nothing.
 */
export async function squashMergePreview({ repoPath, branch, baseBranch }: { repoPath: string; branch: string; baseBranch: string }): Promise<MergePreview> {
  const baseSha = await resolveCommit(repoPath, `refs/heads/${baseBranch}`);
  const head = await resolveCommit(repoPath, `refs/heads/${branch}`);
  if (!baseSha) return { status: "missing", files: [], reason: `Base branch ${baseBranch} does not exist.` };
  if (!head) return { status: "missing", files: [], reason: `Branch ${branch} does not exist.` };
  const merged = await git(repoPath, ["merge-tree", "--write-tree", "--name-only", "--no-messages", baseSha, head], { allowFailure: true });
  const [tree = "", ...rest] = merged.stdout.split("\n");
  if (merged.code === 1) {
    const files = [...new Set(rest.map((l) => l.trim()).filter(Boolean))].map((path) => ({ path, added: null, removed: null }));
    return { status: "conflict", files, reason: `${files.length} file(s) conflict with changes on ${baseBranch}` };
  }
  if (merged.code !== 0) return { status: "missing", files: [], reason: `git merge-tree failed: ${merged.stderr.trim().slice(0, 300)}` };
  const stat = await git(repoPath, ["diff", "--numstat", "--no-renames", "-z", baseSha, tree.trim()]);
  const files = stat.stdout
    .split("\0")
    .filter(Boolean)
    .map((entry) => {
      const [added = "-", removed = "-", ...name] = entry.split("\t");
      const count = (n: string) => (n === "-" ? null : Number(n));
      return { path: name.join("\t"), added: count(added), removed: count(removed) };
    });
  return files.length === 0 ? { status: "up_to_date", files: [] } : { status: "ready", files };
}
