import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { git, gitOut, resolveCommit } from "@/lib/git/run";
import type { EvalTask } from "./run";
import { checkInSandbox } from "./checkout";
import { isDocPath, isTestPath, testCommand } from "./tests-cmd";
import type { PullRequest } from "./pulls";

/*
 * `--from-history`: turn a repository's own history into eval tasks. Every commit on the main branch (first parent)
 * that changes code and its tests together is a candidate: the task starts at its parent, its request is the commit
 * message, and its hidden check is the tests the commit added or changed (withheld from the agent: they are the
 * commit's versions, written only into the check's checkout), plus the repository's other tests. A candidate is kept
 * only when it is valid — the SWE-bench rule: the changed tests fail at the parent and pass at the commit, and the other
 * tests pass at the commit. Every check runs in the sandbox, on a private clone: the mined repository is only read.
 */

export type Candidate = {
  commit: string;
  subject: string;
  valid: boolean;
  /** Why the candidate was dropped (null when kept). */
  reason: string | null;
  task: EvalTask | null;
};

export type MineOptions = {
  /** A local repository (its work tree or git directory). */
  repo: string;
  /** Stop after this many valid tasks (default 10). */
  count?: number;
  /** Only commits at or after this date (anything `git log --since` reads). */
  since?: string;
  /** The main branch (default: main, else master, else HEAD). */
  branch?: string;
  /** A shell line running tests; `{tests}` is replaced by the quoted test files (default: by file kind). */
  testCommand?: string;
  /** Merged pull requests (a GitHub project): these are the candidates instead of the branch's commits. */
  pullRequests?: PullRequest[];
  /** Called with each candidate as it is decided (the CLI prints it). */
  onCandidate?: (candidate: Candidate) => void;
};

const short = (sha: string) => sha.slice(0, 8);

function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
}

async function mainBranch(repo: string, branch?: string): Promise<string> {
  for (const ref of branch ? [branch] : ["main", "master", "HEAD"]) if (await resolveCommit(repo, ref)) return ref;
  throw new Error(branch ? `${repo} has no branch ${branch}` : `${repo} has no main branch (neither main, master nor HEAD)`);
}

type Change = { status: string; file: string };

async function changes(repo: string, parent: string, commit: string): Promise<Change[]> {
  const out = (await git(repo, ["diff", "--no-renames", "--name-status", "-z", parent, commit])).stdout.split("\0").filter(Boolean);
  const list: Change[] = [];
  for (let i = 0; i + 1 < out.length; i += 2) list.push({ status: out[i]!, file: out[i + 1]! });
  return list;
}

/** The lines of a test run's output that say what failed (else its last lines), on one line. */
function lastLines(output: string): string {
  const lines = output.split("\n").map((l) => l.trim()).filter(Boolean);
  const telling = lines.filter((l) => /not ok|error|expected|actual|!==|fail/i.test(l) && !/^#|^failureType:|^error: [|>]-?$/.test(l));
  return (telling.length ? telling.slice(0, 3) : lines.slice(-3)).join(" · ").slice(0, 300);
}

/** Decide one commit: a kept task or the reason it was dropped. `clone` is the private clone the checks run on. */
async function decide({ source, clone, commit, template, pr }: { source: string; clone: string; commit: string; template?: string; pr?: PullRequest }): Promise<Candidate> {
  if (pr && !(await resolveCommit(clone, commit))) {
    return { commit, subject: pr.title, valid: false, reason: `pull request #${pr.number}'s merge commit is not in the repository (fetch it)`, task: null };
  }
  const subject = pr ? pr.title : await gitOut(clone, ["log", "-1", "--format=%s", commit]);
  const drop = (reason: string): Candidate => ({ commit, subject, valid: false, reason, task: null });
  const parents = (await gitOut(clone, ["rev-list", "--parents", "-n", "1", commit])).split(" ").slice(1);
  const parent = parents[0];
  if (!parent) return drop("the first commit: there is no parent to start from");
  const changed = await changes(clone, parent, commit);
  const tests = changed.filter((c) => isTestPath(c.file));
  const code = changed.filter((c) => !isTestPath(c.file) && !isDocPath(c.file));
  if (!tests.length) return drop("changes no test files");
  if (!code.length) return drop("changes tests but no code");
  const runnable = tests.filter((c) => c.status !== "D").map((c) => c.file);
  if (!runnable.length) return drop("only deletes tests: nothing to run");
  const hiddenFiles: Record<string, string> = {};
  for (const file of runnable) hiddenFiles[file] = (await git(clone, ["show", `${commit}:${file}`])).stdout;
  const others = (await gitOut(clone, ["ls-tree", "-r", "-z", "--name-only", commit]))
    .split("\0")
    .filter((f) => f && isTestPath(f) && !runnable.includes(f));
  const failToPass = `(${testCommand(runnable, template)})`;
  const passToPass = others.length ? `(${testCommand(others, template)})` : null;

  const atParent = await checkInSandbox({ repoPath: clone, ref: parent, command: failToPass, hiddenFiles });
  if (atParent.passed) return drop("its tests already pass at the parent: they do not check the change");
  // At the commit, in one checkout: its own tests (exit 101 when they fail), then the others (102).
  const atCommit = await checkInSandbox({
    repoPath: clone,
    ref: commit,
    command: `${failToPass} || exit 101${passToPass ? `; ${passToPass} || exit 102` : ""}`,
  });
  if (atCommit.exitCode === 102) return drop(`the other tests fail at the commit: ${lastLines(atCommit.output)}`);
  if (!atCommit.passed) return drop(`its tests fail at the commit itself: ${lastLines(atCommit.output)}`);
  const message = pr ? `${pr.title}\n\n${pr.body}`.trim() : (await gitOut(clone, ["log", "-1", "--format=%B", commit])).trim();
  const task: EvalTask = {
    id: `${pr ? `pr-${pr.number}` : `h-${short(commit)}`}${slug(subject) ? `-${slug(subject)}` : ""}`,
    description: `Mined from ${source} at ${short(commit)}${pr ? ` (pull request #${pr.number})` : ""}: ${subject} (starts at the parent ${short(parent)}; tests withheld: ${runnable.join(", ")})`,
    source: "history",
    repo: { path: source, commit: parent },
    solution: commit,
    hiddenFiles,
    request: message,
    check: passToPass ? `${failToPass} && ${passToPass}` : failToPass,
  };
  return { commit, subject, valid: true, reason: null, task };
}

/**
 * Mine the repository's main branch, newest commit first, until `count` valid tasks are found (or history ends).
 * Returns every candidate decided, kept and dropped.
 */
export async function mineHistory(options: MineOptions): Promise<Candidate[]> {
  const source = fs.realpathSync(path.resolve(options.repo));
  const top = await git(source, ["rev-parse", "--show-toplevel"], { allowFailure: true });
  const repo = top.code === 0 && top.stdout.trim() ? top.stdout.trim() : source;
  const branch = await mainBranch(repo, options.branch);
  const count = options.count ?? 10;
  // A private clone: the sandboxes' worktrees are added to it, never to the mined repository.
  const clone = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-eval-mine-"));
  try {
    await git(os.tmpdir(), ["clone", "-q", "--no-checkout", "--no-hardlinks", "--", repo, clone]);
    const tip = await gitOut(repo, ["rev-parse", `${branch}^{commit}`]);
    const list = options.pullRequests
      ? options.pullRequests.map((pr) => ({ commit: pr.mergeCommit, pr }))
      : (await gitOut(clone, ["rev-list", "--first-parent", ...(options.since ? [`--since=${options.since}`] : []), tip]))
          .split("\n")
          .filter(Boolean)
          .map((commit) => ({ commit, pr: undefined }));
    const candidates: Candidate[] = [];
    for (const { commit, pr } of list) {
      if (candidates.filter((c) => c.valid).length >= count) break;
      const candidate = await decide({ source: repo, clone, commit, template: options.testCommand, pr });
      candidates.push(candidate);
      options.onCandidate?.(candidate);
    }
    return candidates;
  } finally {
    fs.rmSync(clone, { recursive: true, force: true });
  }
}

/** Write the kept tasks as `<id>.json` files (the task format loadTasks reads). */
export function writeTasks(dir: string, tasks: EvalTask[]): void {
  fs.mkdirSync(dir, { recursive: true });
  for (const task of tasks) fs.writeFileSync(path.join(dir, `${task.id}.json`), `${JSON.stringify(task, null, 2)}\n`);
}
