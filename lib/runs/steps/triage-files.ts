import fs from "node:fs/promises";
import { git } from "@/lib/git";
import type { TriageEvidence } from "@/lib/agents/triage";
import type { RunSandbox } from "@/lib/sandbox";

/*
 * Triage's looks at the workspace (./triage.ts): whether a task's files are present — in the run branch's tree, in the
 * local worktree, or by a shell in the sandbox, each answering as `test -e` in the sandbox would — and whether checks
 * left anything to roll back.
 */

/** A plain relative path (no `.`, `..` or empty segment, not inside `.git`): one the tree or the worktree can answer for. */
const plainPath = (p: string) => {
  const segments = p.split("/");
  return p !== "" && segments[0] !== ".git" && segments.every((s) => s !== "" && s !== "." && s !== "..");
};

/** A task's file as `test -e` gets it: without its trailing slashes. */
const stripped = (p: string) => p.replace(/\/+$/, "");

/**
 * Whether each path is present in a fresh checkout of the run branch, as `test -e` in it would say, from one
 * `git ls-tree` of the paths and their parents: present when the tree has it and no part of it is a symbolic link.
 * Null when any path is not plain, or a symbolic link or submodule is on its way (what it points at is the
 * filesystem's to say), or the branch cannot be read: the caller asks the sandbox instead.
 */
export async function filesInBranch(run: { repoPath: string; branch: string }, paths: string[]): Promise<Map<string, boolean> | null> {
  const plain = new Map(paths.map((p) => [p, stripped(p)]));
  if (![...plain.values()].every(plainPath)) return null;
  const queried = new Set<string>();
  for (const p of plain.values()) {
    const segments = p.split("/");
    for (let i = 1; i <= segments.length; i++) queried.add(segments.slice(0, i).join("/"));
  }
  const listed = await git(run.repoPath, ["--literal-pathspecs", "ls-tree", "-t", "-z", "--full-tree", `refs/heads/${run.branch}`, "--", ...queried], {
    allowFailure: true,
  });
  if (listed.code !== 0) return null;
  const modes = new Map<string, string>();
  for (const entry of listed.stdout.split("\0")) {
    const tab = entry.indexOf("\t");
    if (tab > 0) modes.set(entry.slice(tab + 1), entry.slice(0, entry.indexOf(" ")));
  }
  const out = new Map<string, boolean>();
  for (const [original, p] of plain) {
    const segments = p.split("/");
    let present = true;
    for (let i = 1; i <= segments.length && present; i++) {
      const mode = modes.get(segments.slice(0, i).join("/"));
      if (mode === "120000" || mode === "160000") return null;
      // Missing, or a file where a directory would have to be (test -e says no to both).
      if (mode === undefined || (i < segments.length && mode !== "040000")) present = false;
    }
    out.set(original, present);
  }
  return out;
}

/**
 * Whether a plain path is present in a local worktree, looked at from here (lstat of each part): true or false where
 * that is what `test -e` inside the sandbox says too — every part a real file or directory, each directory on the way
 * searchable by its owner, this process's user (the sandbox's, and without the capabilities a root server has) — and
 * null otherwise (a symbolic link, a directory the sandbox could not search): the sandbox is asked.
 */
async function presentInWorktree(root: string, p: string): Promise<boolean | null> {
  if (!plainPath(p)) return null;
  const segments = p.split("/");
  const uid = process.getuid?.();
  for (let i = 1; i <= segments.length; i++) {
    const stat = await fs.lstat(`${root}/${segments.slice(0, i).join("/")}`).catch((error: NodeJS.ErrnoException) => error);
    if (stat instanceof Error) return stat.code === "ENOENT" || stat.code === "ENOTDIR" ? false : null;
    if (stat.isSymbolicLink()) return null;
    if (i === segments.length) return true;
    if (!stat.isDirectory()) return false;
    if (stat.uid !== uid || (stat.mode & 0o100) === 0) return null;
  }
  return null;
}

/**
 * Which of a task's files are present in the workspace. A local worktree is looked at from here; where that cannot
 * tell (or the sandbox is E2B's), one shell for all of them (one `test -e` per file, in order) instead of a process per
 * file. A shell that fails or times out counts every file it did not report as missing.
 */
export async function filesPresent(
  sandbox: Pick<RunSandbox, "exec" | "kind"> & { workspacePath?: string },
  paths: string[],
): Promise<TriageEvidence["files"]> {
  if (!paths.length) return [];
  if (sandbox.kind === "local" && sandbox.workspacePath) {
    const root = sandbox.workspacePath;
    const looked = await Promise.all(paths.map((p) => presentInWorktree(root, stripped(p))));
    if (looked.every((v) => v !== null)) return paths.map((path, i) => ({ path, present: looked[i]! }));
  }
  const r = await sandbox.exec("sh", ["-c", 'for f do if test -e "$f"; then echo 1; else echo 0; fi; done', "sh", ...paths.map(stripped)], {
    timeoutMs: 10_000,
  });
  const answers = r.timedOut ? [] : r.stdout.split("\n");
  return paths.map((path, i) => ({ path, present: answers[i] === "1" }));
}

/**
 * Whether the checks left anything a rollback would undo: a change to a tracked file or the index, an untracked file,
 * or a work-in-progress commit on top of the last checkpoint (the rollback's target). Two git calls side by side,
 * against the rollback's three or four in a row.
 */
export async function workspaceChanged(sandbox: Pick<RunSandbox, "workspacePath" | "location">): Promise<boolean> {
  const worktree = sandbox.location;
  const [status, head] = await Promise.all([
    git(sandbox.workspacePath, ["status", "--porcelain"], { worktree }),
    git(sandbox.workspacePath, ["log", "-1", "--format=%B", "HEAD"], { worktree }),
  ]);
  return status.stdout.trim() !== "" || /^Gatehouse-Kind: wip$/m.test(head.stdout);
}
