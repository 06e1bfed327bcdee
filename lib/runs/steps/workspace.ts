import { getEnv } from "@/lib/env";
import { redact } from "@/lib/redact";
import { scanChangesForSecrets, withheldPaths } from "../secret-scan";
import { log } from "@/lib/log";
import { attachSandbox, releaseSandbox, restoreSandbox, type CreateSandboxOptions, type SandboxRequest } from "@/lib/sandbox";
import { commitWorkInProgress, deleteTaskBranches, git, lastCheckpoint, readProjectConfig, taskBranchName } from "@/lib/git";
import { listEvents } from "@/lib/db/event-store";
import { append, loadRun, type RunContext } from "./context";

/*
 * The run's workspace (its sandbox): the options it is made with, parked before a wait for a person (work in progress
 * committed, sandbox dropped) and restored after, the secrets a change would commit, and files put back as the last
 * checkpoint has them. A run waiting for a person holds no sandbox.
 */

/**
 * The run's sandbox options, with the repository's `.autonomous/config.json` applied every time (excluded paths, and
 * outbound network only when it sets sandbox.allowInternet), so a sandbox recreated after a restart or a pause commits
 * and compares exactly what the first one did.
 */
export async function sandboxOptions(run: RunContext, taskId?: string | null, workspace?: string | null): Promise<CreateSandboxOptions & { branch: string }> {
  return optionsWith(run, await projectSandboxConfig(run), taskId, workspace);
}

/**
 * The run's sandbox (a task's: its lane's `workspace`, else its own) as a step attaches or releases it: the options
 * above are read only when no sandbox is open in this process. An open one was made with them, and reading the
 * repository's config is a git process, which every turn of every task paid on its way to the model.
 */
export function runSandbox(run: RunContext, taskId?: string | null, workspace?: string | null, diffBase?: string): SandboxRequest {
  const base = diffBase ? { diffBase } : {};
  return { runId: sandboxIdOf(run, taskId, workspace), ...base, read: async () => ({ ...(await sandboxOptions(run, taskId, workspace)), ...base }) };
}

const sandboxIdOf = (run: RunContext, taskId?: string | null, workspace?: string | null) =>
  taskId ? (workspace ?? taskSandboxId(run.runId, taskId)) : run.runId;

function projectSandboxConfig(run: RunContext): Promise<{ excludePaths: string[]; allowInternet: boolean }> {
  return readProjectConfig({ repoPath: run.repoPath, ref: run.branch }).catch(() => ({ excludePaths: [] as string[], allowInternet: false }));
}

function optionsWith(
  run: RunContext,
  file: { excludePaths: string[]; allowInternet: boolean },
  taskId?: string | null,
  workspace?: string | null,
): CreateSandboxOptions & { branch: string } {
  return {
    // A parallel task's sandbox: its lane's (`workspace`, laneSandboxId), else its own — a worktree on the task's own
    // branch (cut from the run branch).
    runId: sandboxIdOf(run, taskId, workspace),
    repoPath: run.repoPath,
    ref: run.branch,
    branch: taskId ? taskBranchName(run.branch, taskId) : run.branch,
    excludePaths: file.excludePaths,
    allowInternet: file.allowInternet,
  };
}

/** The sandbox id (and so the worktree directory) of a parallel task of the run. */
export function taskSandboxId(runId: string, taskId: string): string {
  return `${runId}--${taskId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/**
 * The sandbox of a parallel lane (inngest/run/tasks.ts): one worktree that the lane's tasks use one after another
 * (LocalSandbox.repoint between them). `_` after the run id: a task's own sandbox id has `--` there, so the two never
 * meet, whatever the plan names its tasks.
 */
export function laneSandboxId(runId: string, round: number, lane: number): string {
  return `${runId}_lane-${round}-${lane}`;
}

/**
 * Drop the sandboxes of the run's parallel tasks (TASK_BRANCH_CREATED: each task's own, or its lane's, `workspace`):
 * their commands stop. Their branches stay for a failed run (unmerged work can be looked at), and go with a cancelled
 * one (`deleteBranches`).
 */
export async function releaseTaskSandboxes(run: RunContext, { deleteBranches = false }: { deleteBranches?: boolean } = {}): Promise<void> {
  const events = await listEvents({ runId: run.runId, limit: 100_000 });
  const ids = [...new Set(events.flatMap((e) => (e.type === "TASK_BRANCH_CREATED" ? [e.payload.taskId] : [])))];
  // Each sandbox once, with the branch of the last task begun in it (the one its worktree has checked out).
  const sandboxes = new Map<string, string>();
  for (const e of events) if (e.type === "TASK_BRANCH_CREATED") sandboxes.set(e.payload.workspace ?? taskSandboxId(run.runId, e.payload.taskId), e.payload.taskId);
  const file = await projectSandboxConfig(run);
  const all = [...sandboxes].map(([workspace, taskId]) => optionsWith(run, file, taskId, workspace));
  // Side by side: each release is its own worktree (git's worktree commands queue per repository themselves).
  await Promise.all(all.map((options) => releaseSandbox(options).catch(() => null)));
  if (deleteBranches) await deleteTaskBranches({ repoPath: run.repoPath, branches: ids.map((id) => taskBranchName(run.branch, id)) });
}

/** Before a wait: commit the work in progress and drop the sandbox; returns the tree to check on resume. */
export async function parkSandbox(run: RunContext, reason: string, stepKey: string): Promise<string | null> {
  const dir = `${getEnv().dataDir}/workspaces/${runIdDir(run.runId)}`;
  const exists = await import("node:fs/promises").then((fs) => fs.stat(dir).then(() => true).catch(() => false));
  if (!exists) return null;
  const sandbox = await attachSandbox(runSandbox(run));
  // The work in progress is committed like a checkpoint, so it gets the same guard: a file whose changes hold a secret
  // (a command or a check copied a key file before the wait) is left out of the commit — and so out of the branch and
  // the restored workspace — and the run says which.
  const leaks = await secretsInChanges(sandbox);
  const wip = await commitWorkInProgress({ sandbox, runId: run.runId, reason, withhold: leaks });
  if (leaks.length) {
    const files = leaks.map((f) => redact(f));
    log.warn("secret withheld from a work-in-progress commit", { runId: run.runId, files });
    await append(run.runId, `${stepKey}:withheld`, [{ type: "SECRET_WITHHELD", payload: { files, when: reason } }]);
  }
  await releaseSandbox(runSandbox(run));
  return wip.tree;
}

const runIdDir = (runId: string) => runId.replace(/[^A-Za-z0-9_-]/g, "_");

export async function restore({ runId, expectedTree }: { runId: string; expectedTree: string }) {
  const run = await loadRun({ runId });
  const sandbox = await restoreSandbox({ ...(await sandboxOptions(run)), expectedTree });
  return { workspace: sandbox.id };
}

/**
 * Files whose added lines hold a secret (a configured one, a fragment or an encoding of one, or a key shape), from the
 * workspace's diff, as paths in the worktree (redact them before showing them). The file tools refuse such content,
 * but a command can still write it (e.g. copy a key file). A file too large to check counts as holding one
 * (lib/runs/secret-scan.ts).
 */
export async function secretsInChanges(sandbox: Parameters<typeof scanChangesForSecrets>[0]): Promise<string[]> {
  return withheldPaths(await scanChangesForSecrets(sandbox));
}

/**
 * Put files back as the last checkpoint has them (delete those it lacks), through the sandbox: how a command's changes
 * that the policy refuses are undone, in any sandbox.
 */
export async function restoreFromCheckpoint(sandbox: Awaited<ReturnType<typeof attachSandbox>>, paths: string[]) {
  if (!paths.length || !sandbox.workspacePath || !sandbox.location) return;
  const sha = await lastCheckpoint(sandbox);
  for (const p of paths) {
    const kept = await git(sandbox.workspacePath, ["show", `${sha}:${p}`], { worktree: sandbox.location, allowFailure: true });
    if (kept.code === 0) await sandbox.writeFile(p, kept.stdout);
    else await sandbox.exec("rm", ["-f", "--", p]);
  }
}
