import { createHash } from "node:crypto";
import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";
import { commitMessage, commitOnto, readBlobs } from "./commit-files";
import { git, gitOut, resolveCommit } from "./run";

/*
 * Parallel tasks (limits.maxConcurrentTasks): each task works on its own branch, cut from the run branch once its
 * dependencies are merged, and is merged back into the run branch by host-side git with the hardened configuration
 * (./run.ts) — `git merge-tree` computes the three-way merge without any working tree, so nothing from the task's
 * worktree (its config, hooks, attributes on disk) takes part.
 */

/**
 * A task's branch: the run branch with the task id appended (only characters a branch name may hold). Every stored
 * event passes the secret filter (lib/redact.ts), so a name the filter would rewrite (a run branch ending in `…9sk`
 * followed by `--` and a long task id reads as an OpenAI key) would be stored as another name than the branch's: such
 * a task's branch ends in `--t` and a short hash of its id instead, too short to complete any key's shape.
 */
export function taskBranchName(runBranch: string, taskId: string): string {
  const id = taskId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 40) || "task";
  const named = `${runBranch}--${id}`;
  if (redact(named) === named) return named;
  return `${runBranch}--t${createHash("sha256").update(taskId).digest("hex").slice(0, 8)}`;
}

/**
 * (Re)cut the task's branch at the run branch's tip: the task starts from everything merged so far. The task's
 * worktree must be gone (its sandbox released) first. Returns the commit it starts from.
 */
export async function cutTaskBranch({ repoPath, runBranch, branch }: { repoPath: string; runBranch: string; branch: string }): Promise<string> {
  const tip = await resolveCommit(repoPath, `refs/heads/${runBranch}`);
  if (!tip) throw new AppError("not_found:git", `Branch ${runBranch} does not exist.`);
  await git(repoPath, ["update-ref", `refs/heads/${branch}`, tip]);
  return tip;
}

/**
 * Delete a task's branch (once merged, or when the run is cancelled): only if it still points at `expected` when given
 * (compare-and-swap), and quietly when it is gone already. The run branch keeps every merged commit.
 */
export async function deleteTaskBranch({ repoPath, branch, expected }: { repoPath: string; branch: string; expected?: string }): Promise<void> {
  await git(repoPath, ["update-ref", "-d", `refs/heads/${branch}`, ...(expected ? [expected] : [])], { allowFailure: true });
}

/** Delete task branches (merged ones) with one git process, quietly for those gone already. */
export async function deleteTaskBranches({ repoPath, branches }: { repoPath: string; branches: string[] }): Promise<void> {
  if (!branches.length) return;
  const deleted = await git(repoPath, ["update-ref", "--stdin"], { input: branches.map((b) => `delete refs/heads/${b}\n`).join(""), allowFailure: true });
  // One transaction: a branch it could not delete (locked) leaves them all; each is deleted on its own then.
  if (deleted.code !== 0) for (const branch of branches) await deleteTaskBranch({ repoPath, branch });
}

/** A conflicting file as a person sees it at the conflict gate: the run branch's side and the task's side. */
export type ConflictSide = { path: string; runBranch: string | null; task: string | null };

export type TaskMergeResult =
  | { status: "merged"; sha: string }
  | { status: "up_to_date"; sha: string }
  | { status: "conflict"; files: string[]; sides: ConflictSide[] };

/** How much of each side of a conflicting file the gate shows. */
const SIDE_CHARS = 4_000;
const SIDE_FILES = 10;

/** Both sides of each conflicting file (the first SIDE_FILES), read with one process. */
async function conflictSides(repoPath: string, tip: string, head: string, files: string[]): Promise<ConflictSide[]> {
  const shown = files.slice(0, SIDE_FILES);
  const blobs = await readBlobs(repoPath, shown.flatMap((file) => [`${tip}:${file}`, `${head}:${file}`]));
  const cut = (b: { content: string } | null | undefined) =>
    !b ? null : b.content.length > SIDE_CHARS ? `${b.content.slice(0, SIDE_CHARS)}\n[… cut at ${SIDE_CHARS} characters]` : b.content;
  return shown.map((file, i) => ({ path: file, runBranch: cut(blobs[2 * i]), task: cut(blobs[2 * i + 1]) }));
}

/** The tips (commit and tree) of refs, with one process; a ref that does not exist is missing from the map. */
async function refTips(repoPath: string, refs: string[]): Promise<Map<string, { commit: string; tree: string }>> {
  const out = await gitOut(repoPath, ["for-each-ref", "--format=%(objectname) %(tree) %(refname)", ...refs]);
  const wanted = new Set(refs);
  const tips = new Map<string, { commit: string; tree: string }>();
  // A pattern matches a prefix too (refs/heads/a matches refs/heads/a/b): only the exact refs count.
  for (const line of out.split("\n")) {
    const [commit, tree, name] = line.split(" ");
    if (name && wanted.has(name) && commit && tree) tips.set(name, { commit, tree });
  }
  return tips;
}

/**
 * Which of `refs` are contained in what `ref` points at (reachable from it), with one process: each with its commit.
 * `ref` itself is among them (it contains itself), with the commit the answer is about.
 */
async function containedIn(repoPath: string, ref: string, refs: string[]): Promise<Map<string, string>> {
  // A missing `ref` fails here: the caller says which branch is missing (from its own read).
  const out = await git(repoPath, ["for-each-ref", "--format=%(objectname) %(refname)", `--merged=${ref}`, ref, ...refs], { allowFailure: true });
  const wanted = new Set([ref, ...refs]);
  const found = new Map<string, string>();
  for (const line of out.stdout.trim().split("\n")) {
    const [commit, name] = line.split(" ");
    if (commit && name && wanted.has(name)) found.set(name, commit);
  }
  return found;
}

/** The merge commits among the newest on `tip` that brought each of `heads` in (as their second parent). */
async function mergeCommitsOf(repoPath: string, tip: string, heads: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (!heads.length) return found;
  const wanted = new Set(heads);
  const out = await git(repoPath, ["rev-list", "--merges", "--parents", "--max-count=200", tip], { allowFailure: true });
  for (const line of out.stdout.split("\n")) {
    const [sha, , second] = line.trim().split(" ");
    if (sha && second && wanted.has(second) && !found.has(second)) found.set(second, sha);
  }
  return found;
}

/**
 * What is committed on top of a step's merges, moved with them (see mergeTaskBranches' `onTop`): read at `tree`, the
 * merges' tree (their last commit may still be being made; its id is not given).
 */
export type OnTopOfMerges = (merged: { tree: string; results: TaskMergeResult[] }) => Promise<{ files: Record<string, string | null>; message: string } | null>;

/**
 * Merge task branches into the run branch, one after another in the order given (plan order): for each, a merge
 * commit (the run branch so far first parent, the task second) whose tree is `git merge-tree`'s — computed without any
 * working tree — then, with `onTop`, a commit of files on top of the merges (the tasks' checked boxes), and the run
 * branch moved once to the last of them by compare-and-swap (all again when it moved meanwhile). Two git processes
 * per task, and a few per call: no task's merge waits for a ref to move. Idempotent: a task branch already contained in
 * the run branch (a re-run step after a crash) is `up_to_date` with the merge commit that brought it in. A conflict
 * leaves that task out (the later tasks merge without it) and names the files with both sides.
 */
export async function mergeTaskBranches({
  repoPath,
  runBranch,
  runId,
  tasks,
  onTop,
}: {
  repoPath: string;
  runBranch: string;
  runId: string;
  tasks: Array<{ taskId: string; branch: string; title: string }>;
  onTop?: OnTopOfMerges;
}): Promise<TaskMergeResult[]> {
  const ref = `refs/heads/${runBranch}`;
  const refOf = (branch: string) => `refs/heads/${branch}`;
  for (let attempt = 1; ; attempt++) {
    // The tips and which tasks the run branch contains already, side by side; both about the same run branch tip, or
    // read again (it moved in between).
    const [tips, contained] = await Promise.all([
      refTips(repoPath, [ref, ...tasks.map((t) => refOf(t.branch))]),
      containedIn(repoPath, ref, tasks.map((t) => refOf(t.branch))),
    ]);
    const start = tips.get(ref);
    if (!start) throw new AppError("not_found:git", `Branch ${runBranch} does not exist.`);
    for (const t of tasks) if (!tips.has(refOf(t.branch))) throw new AppError("not_found:git", `Branch ${t.branch} does not exist.`);
    if (contained.get(ref) !== start.commit) {
      if (attempt >= 5) throw new AppError("conflict:git", `Branch ${runBranch} kept moving while merging tasks.`);
      continue;
    }
    const headOf = (t: { branch: string }) => tips.get(refOf(t.branch))!.commit;
    const bringers = await mergeCommitsOf(repoPath, start.commit, tasks.filter((t) => contained.has(refOf(t.branch))).map(headOf));
    let commit = start.commit;
    let tree = start.tree;
    /** The last merge's commit while it is being made: the next merge waits for it, what goes on top only at its commit. */
    let making: Promise<string> | null = null;
    const results: TaskMergeResult[] = [];
    for (const task of tasks) {
      const head = headOf(task);
      if (contained.has(refOf(task.branch))) {
        results.push({ status: "up_to_date", sha: bringers.get(head) ?? start.commit });
        continue;
      }
      if (making) commit = await making;
      making = null;
      const merged = await git(repoPath, ["merge-tree", "--write-tree", "--name-only", "--no-messages", commit, head], { allowFailure: true });
      const [written = "", ...rest] = merged.stdout.split("\n");
      if (merged.code === 1) {
        const files = [...new Set(rest.map((l) => l.trim()).filter(Boolean))];
        results.push({ status: "conflict", files, sides: await conflictSides(repoPath, commit, head, files) });
        continue;
      }
      if (merged.code !== 0) throw new AppError("internal:git", `git merge-tree failed: ${merged.stderr.trim().slice(0, 500)}`);
      const message = commitMessage({ subject: `Merge task ${task.taskId}: ${task.title}`, runId, kind: "merge", taskId: task.taskId });
      const result = { status: "merged" as const, sha: "" };
      results.push(result);
      making = gitOut(repoPath, ["commit-tree", written.trim(), "-p", commit, "-p", head, "-F", "-"], { input: message }).then((sha) => (result.sha = sha));
      // Awaited below; a failure meanwhile (while what goes on top is read) is not an unhandled rejection.
      making.catch(() => null);
      tree = written.trim();
    }
    // What goes on top is read from the merges' tree while their last commit is being made (one process fewer in a row).
    const last = making ?? Promise.resolve(commit);
    const extra = onTop ? await onTop({ tree, results }) : null;
    commit = extra ? (await commitOnto({ repoPath, parent: last, parentTree: tree, files: extra.files, message: extra.message })).sha : await last;
    if (commit === start.commit) return results;
    const moved = await git(repoPath, ["update-ref", ref, commit, start.commit], { allowFailure: true });
    if (moved.code === 0) return results;
    if (attempt >= 5) throw new AppError("conflict:git", `Branch ${runBranch} kept moving while merging tasks ${tasks.map((t) => t.taskId).join(", ")}.`);
  }
}
