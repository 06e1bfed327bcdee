import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { git, gitEnv, gitOut, listWorktrees, resolveCommit, SAFE_CONFIG, worktreeLocation } from "./run";
import { runChild } from "./spawner";

export type CommitResult = { sha: string; tree: string; changed: boolean };

/** A commit message that names the run (and task), with trailers rebuild and rollback can search for. */
export function commitMessage({
  subject,
  runId,
  kind,
  taskId,
  body,
}: {
  subject: string;
  runId: string;
  kind: "spec" | "checkpoint" | "wip" | "records" | "memory" | "merge" | "scope-revert";
  taskId?: string;
  body?: string;
}): string {
  const trailers = [`Gatehouse-Run: ${runId}`, `Gatehouse-Kind: ${kind}`, ...(taskId ? [`Gatehouse-Task: ${taskId}`] : [])];
  return `${subject.replace(/\s+/g, " ").trim().slice(0, 200)}\n\n${body ? `${body.trim()}\n\n` : ""}${trailers.join("\n")}\n`;
}

/**
 * Files read at a commit named by its full id: what a commit holds never changes, and every turn of every task reads
 * the same repository files (instructions, MCP servers) at the run's base commit — one git process each, otherwise.
 */
const atCommit = new Map<string, string | null>();
const AT_COMMIT_ENTRIES = 256;
const AT_COMMIT_MAX_CHARS = 256 * 1024;

/** Read one file at a ref, or null when it does not exist there. */
export async function readFileAt({ repoPath, ref, path: file }: { repoPath: string; ref: string; path: string }): Promise<string | null> {
  const immutable = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(ref);
  const key = `${repoPath}\0${ref}\0${file}`;
  if (immutable && atCommit.has(key)) return atCommit.get(key)!;
  const r = await git(repoPath, ["cat-file", "blob", `${ref}:${file}`], { allowFailure: true });
  const content = r.code === 0 ? r.stdout : null;
  // A miss is kept only when git says the commit exists without the file (not when the commit or repository is gone).
  if (immutable && (content === null ? /does not exist in/.test(r.stderr) : content.length <= AT_COMMIT_MAX_CHARS)) {
    if (atCommit.size >= AT_COMMIT_ENTRIES) atCommit.delete(atCommit.keys().next().value!);
    atCommit.set(key, content);
  }
  return content;
}

/**
 * Many files at once, each `{ ref, path }`, with one `git cat-file --batch` process (not one per file: a project's
 * planning reads a file on every run branch): each file's blob id and content, in order, or null where it does not exist.
 */
export function readFilesAt({
  repoPath,
  files,
}: {
  repoPath: string;
  files: Array<{ ref: string; path: string }>;
}): Promise<Array<{ blob: string; content: string } | null>> {
  return readBlobs(repoPath, files.map((f) => `${f.ref}:${f.path}`));
}

/**
 * Many objects, each named as `git cat-file` takes it (a blob id, `<ref>:<path>`), with one `git cat-file --batch`
 * process through the git helper: each blob's id and content, in order, or null where it is missing or not a blob.
 */
export async function readBlobs(repoPath: string, names: string[]): Promise<Array<{ blob: string; content: string } | null>> {
  if (!names.length) return [];
  const input = names.join("\n") + "\n";
  const { code, stdout } = await runChild({ file: "git", args: [...SAFE_CONFIG, "cat-file", "--batch"], cwd: repoPath, env: gitEnv(), input });
  if (code !== 0) throw new AppError("internal:git", `git cat-file --batch failed (exit ${code})`);
  // One header per request: "<id> <type> <bytes>" and the object's bytes, or "<request> missing|ambiguous".
  const out: Array<{ blob: string; content: string } | null> = [];
  let at = 0;
  for (let i = 0; i < names.length; i++) {
    const nl = stdout.indexOf(10, at);
    if (nl < 0) throw new AppError("internal:git", "git cat-file --batch answered fewer objects than asked");
    const header = stdout.subarray(at, nl).toString("utf8");
    const m = /^([0-9a-f]{40,64}) (\w+) (\d+)$/.exec(header);
    if (!m) {
      out.push(null);
      at = nl + 1;
      continue;
    }
    const size = Number(m[3]);
    out.push(m[2] === "blob" ? { blob: m[1]!, content: stdout.subarray(nl + 1, nl + 1 + size).toString("utf8") } : null);
    at = nl + 1 + size + 1;
  }
  return out;
}

/**
 * Commit files (path → content, or null to delete) onto a branch without touching any working tree: a temporary index is
 * filled from the branch tip, the files are written as blobs, and the branch moves only if nobody moved it meanwhile
 * (compare-and-swap, retried). Committing identical content is a no-op, so a retried durable step never commits twice.
 * A worktree that has the branch checked out (a run's sandbox) gets the same files so it stays in step.
 */
export async function commitFiles({
  repoPath,
  branch,
  files,
  message,
}: {
  repoPath: string;
  branch: string;
  files: Record<string, string | null>;
  message: string;
}): Promise<CommitResult> {
  const ref = `refs/heads/${branch}`;
  const index = path.join(os.tmpdir(), `gatehouse-index-${newId("art")}`);
  const env = { GIT_INDEX_FILE: index };
  try {
    for (let attempt = 1; ; attempt++) {
      const tip = await resolveCommit(repoPath, ref);
      if (!tip) throw new AppError("not_found:git", `Branch ${branch} does not exist.`);
      await git(repoPath, ["read-tree", tip], { env });
      const lines: string[] = [];
      for (const [file, content] of Object.entries(files)) {
        if (content === null) lines.push(`0 ${"0".repeat(40)}\t${file}`);
        else lines.push(`100644 ${await gitOut(repoPath, ["hash-object", "-w", "--stdin"], { input: content })}\t${file}`);
      }
      await git(repoPath, ["update-index", "--index-info"], { env, input: `${lines.join("\n")}\n` });
      const tree = await gitOut(repoPath, ["write-tree"], { env });
      const tipTree = await gitOut(repoPath, ["rev-parse", `${tip}^{tree}`]);
      if (tree === tipTree) return { sha: tip, tree, changed: false };
      const sha = await gitOut(repoPath, ["commit-tree", tree, "-p", tip, "-F", "-"], { input: message });
      const moved = await git(repoPath, ["update-ref", ref, sha, tip], { allowFailure: true });
      if (moved.code !== 0) {
        if (attempt < 5) continue;
        throw new AppError("conflict:git", `Branch ${branch} kept moving while committing.`);
      }
      await syncCheckedOut({ repoPath, branch, files });
      return { sha, tree, changed: true };
    }
  } finally {
    await fs.rm(index, { force: true });
  }
}

/** Bring the committed files into any worktree that has `branch` checked out, leaving its other changes alone. */
async function syncCheckedOut({ repoPath, branch, files }: { repoPath: string; branch: string; files: Record<string, string | null> }) {
  const paths = Object.keys(files);
  for (const wt of await listWorktrees(repoPath)) {
    if (wt.bare || wt.branch !== branch) continue;
    // The worktree may be a sandbox's: git is pointed at its real git directory, never at what its `.git` says.
    const worktree = await worktreeLocation({ repoPath, workTree: wt.path }).catch(() => null);
    if (!worktree) continue;
    try {
      await git(wt.path, ["reset", "-q", "HEAD", "--", ...paths], { allowFailure: true, worktree });
      const written = paths.filter((p) => files[p] !== null);
      if (written.length) await git(wt.path, ["checkout", "HEAD", "--", ...written], { worktree });
      for (const p of paths.filter((p) => files[p] === null)) await fs.rm(path.join(wt.path, p), { force: true });
    } catch (error) {
      // A run's sandbox worktree removed meanwhile (a cancelled turn drops it while the records are written): nothing
      // is left there to bring up to date.
      if (await fs.stat(wt.path).then(() => true, () => false)) throw error;
    }
  }
}
