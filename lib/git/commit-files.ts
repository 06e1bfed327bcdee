import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { git, gitEnv, gitOut, listWorktrees, SAFE_CONFIG, worktreeLocation } from "./run";
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

/** A branch's tip commit and its tree (one process), or null when the branch does not exist. */
export async function branchTip(repoPath: string, branch: string): Promise<{ commit: string; tree: string } | null> {
  const ref = `refs/heads/${branch}`;
  // for-each-ref matches a pattern as a prefix too (refs/heads/a matches refs/heads/a/b): only the exact ref counts.
  const out = await gitOut(repoPath, ["for-each-ref", "--format=%(objectname) %(tree) %(refname)", ref]);
  for (const line of out.split("\n")) {
    const [commit, tree, name] = line.split(" ");
    if (name === ref && commit && tree) return { commit, tree };
  }
  return null;
}

/**
 * Write contents as blobs (`git hash-object -w`, never through a filter) with one process however many there are:
 * their ids, in order.
 */
async function writeBlobs(repoPath: string, contents: string[]): Promise<string[]> {
  if (contents.length === 0) return [];
  if (contents.length === 1) return [await gitOut(repoPath, ["hash-object", "-w", "--stdin"], { input: contents[0] })];
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "gatehouse-blobs-"));
  try {
    const files = await Promise.all(contents.map(async (content, i) => {
      const file = path.join(dir, String(i));
      await fs.writeFile(file, content, { mode: 0o600 });
      return file;
    }));
    // --no-filters: the files are hashed as they are (no attributes, no clean filter, no end-of-line conversion), as
    // `--stdin` does.
    const ids = (await gitOut(repoPath, ["hash-object", "-w", "--no-filters", "--stdin-paths"], { input: `${files.join("\n")}\n` })).split("\n");
    if (ids.length !== contents.length) throw new AppError("internal:git", "git hash-object answered fewer blobs than asked");
    return ids;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * A commit of files (path → content, or null to delete) on top of `parent`, made without touching any working tree or
 * ref: a temporary index is filled from the parent, the files are written as blobs, and the commit is made only if the
 * tree changes (else `changed: false` and the parent itself). `parentTree`: the parent's tree, when the caller knows it.
 */
export async function commitOnto({
  repoPath,
  parent,
  parentTree,
  files,
  message,
}: {
  repoPath: string;
  /** The parent commit; it may still be being made (a promise) when `parentTree` is given: only the commit waits for it. */
  parent: string | Promise<string>;
  parentTree?: string;
  files: Record<string, string | null>;
  message: string;
}): Promise<CommitResult> {
  const index = path.join(os.tmpdir(), `gatehouse-index-${newId("art")}`);
  const env = { GIT_INDEX_FILE: index };
  try {
    const entries = Object.entries(files);
    const written = entries.filter(([, content]) => content !== null);
    // Independent: the index filled from the parent's tree, the new blobs written, the parent's tree read.
    const from = parentTree ?? (await parent);
    const [, ids, tipTree] = await Promise.all([
      git(repoPath, ["read-tree", from], { env }),
      writeBlobs(repoPath, written.map(([, content]) => content!)),
      parentTree ?? gitOut(repoPath, ["rev-parse", `${from}^{tree}`]),
    ]);
    const blobOf = new Map(written.map(([file], i) => [file, ids[i]!]));
    const lines = entries.map(([file, content]) => (content === null ? `0 ${"0".repeat(40)}\t${file}` : `100644 ${blobOf.get(file)}\t${file}`));
    await git(repoPath, ["update-index", "--index-info"], { env, input: `${lines.join("\n")}\n` });
    const tree = await gitOut(repoPath, ["write-tree"], { env });
    if (tree === tipTree) return { sha: await parent, tree, changed: false };
    const sha = await gitOut(repoPath, ["commit-tree", tree, "-p", await parent, "-F", "-"], { input: message });
    return { sha, tree, changed: true };
  } finally {
    await fs.rm(index, { force: true });
  }
}

/**
 * Commit files (path → content, or null to delete) onto a branch without touching any working tree (commitOnto), the
 * branch moved only if nobody moved it meanwhile (compare-and-swap, retried). Committing identical content is a no-op,
 * so a retried durable step never commits twice. A worktree that has the branch checked out (a run's sandbox) gets the
 * same files so it stays in step.
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
  for (let attempt = 1; ; attempt++) {
    const tip = await branchTip(repoPath, branch);
    if (!tip) throw new AppError("not_found:git", `Branch ${branch} does not exist.`);
    const made = await commitOnto({ repoPath, parent: tip.commit, parentTree: tip.tree, files, message });
    if (!made.changed) return made;
    const moved = await git(repoPath, ["update-ref", ref, made.sha, tip.commit], { allowFailure: true });
    if (moved.code !== 0) {
      if (attempt < 5) continue;
      throw new AppError("conflict:git", `Branch ${branch} kept moving while committing.`);
    }
    await syncCheckedOut({ repoPath, branch, files });
    return made;
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
