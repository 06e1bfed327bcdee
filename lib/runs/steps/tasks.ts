import { listEvents } from "@/lib/db/event-store";
import { redact } from "@/lib/redact";
import { attachSandbox, hasWorkspace, releaseSandbox, repointSandbox, sandboxKind, startTaskSandbox, type Sandbox } from "@/lib/sandbox";
import { cutTaskBranch, deleteTaskBranch, deleteTaskBranches, DIFF_SAFE, git, mergeTaskBranches, readLatestMemory, resolveCommit, taskBranchName, type ConflictSide, type TaskMergeResult } from "@/lib/git";
import type { ImplementerState } from "@/lib/agents";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { append, loadRun, workflowClock, type WithNow } from "./context";
import { beginImplementation } from "./implement";
import { checkedTasksFile } from "./tasks-file";
import { runSandbox, sandboxOptions, taskSandboxId } from "./workspace";

/*
 * Parallel tasks (limits.maxConcurrentTasks): the steps around one task's own session — its branch cut from the run
 * branch and its starting state, its branch merged back (host-side git), and the attempt's outcome once every task is
 * merged. The sessions' turns are the ordinary implementation steps, run in the task's own sandbox (./implement.ts).
 */

/**
 * Before the first round: the run's own sandbox goes (no worktree may have the run branch out while tasks merge), and
 * the project memory is read once for every task's session (reading it looks at every run branch of the project).
 */
export async function prepareTasks({ runId }: { runId: string }) {
  const run = await loadRun({ runId });
  // Usually none (planning needs no workspace): then the project's config is not read for its options either.
  if (hasWorkspace(run.runId)) await releaseSandbox(runSandbox(run)).catch(() => null);
  const memory = await readLatestMemory({ repoPath: run.repoPath, ref: run.branch });
  return { memory: memory.raw, now: workflowClock.now() };
}

/** What the task's dependencies changed, from their merges (file names and line counts; the task reads the code itself). */
async function dependencySummary(runId: string, repoPath: string, dependsOn: string[]): Promise<string> {
  if (!dependsOn.length) return "";
  const merged = new Map<string, string>();
  for (const e of await listEvents({ runId, limit: 100_000 })) if (e.type === "TASK_MERGED") merged.set(e.payload.taskId, e.payload.commitSha);
  const parts: string[] = [];
  for (const id of dependsOn) {
    const sha = merged.get(id);
    if (!sha) continue;
    const stat = await git(repoPath, ["diff", ...DIFF_SAFE, "--stat", `${sha}^1`, sha, "--", ".", ":(exclude).autonomous"], { allowFailure: true });
    parts.push(`Task ${id} (merged):\n${stat.stdout.trim() || "(no file changes)"}`);
  }
  return redact(parts.join("\n\n"));
}

/**
 * A task's session begins: its branch (re)cut from the run branch as it is now — its dependencies merged — its sandbox,
 * and its starting state. `run` counts the task's runs (2: once more after a merge conflict), `round` the scheduling
 * round. Its sandbox is made here, side by side with the starting state, rather than by its first turn: the lane's
 * (`workspace`), a fresh worktree whose branch is cut by the same git process (`worktree add -B`) for the lane's first
 * task, or — for a later one — the lane's worktree handed on from the task before (`previous`: re-pointed to this
 * task's branch, cut at the round's start commit, and cleaned; LocalSandbox.repoint), with no worktree removed, pruned
 * or added between a lane's tasks; a lane's worktree that cannot be handed on (the git work failed) goes, and a fresh
 * one is made. An E2B task's sandbox is its own, made by its first turn as before (the task before's goes side by side
 * with this task's start). Returns the sandbox used (`workspace`; null: the task's own), which every later step of the
 * task is given.
 */
export async function beginTask({
  runId,
  stepKey,
  plan: doc,
  taskId,
  request,
  feedback,
  maxIterations,
  run: n,
  round,
  memory,
  previousTaskId,
  workspace: lane = null,
  previous = null,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  taskId: string;
  request: string;
  feedback: string | null;
  maxIterations: number;
  run: number;
  round: number;
  /** The project memory, read once for the tasks (prepareTasks). */
  memory?: string | null;
  /** The lane's previous task (inngest/run/tasks.ts): its work is committed on its branch. */
  previousTaskId?: string | null;
  /** The lane's sandbox id (laneSandboxId); absent (a run begun before lanes had one): the task's own. */
  workspace?: string | null;
  /** The lane's previous task's sandbox (null: its own) and the commit its branch was cut at (the round's start). */
  previous?: { workspace: string | null; baseSha: string } | null;
}): Promise<{ state: ImplementerState; branch: string; baseSha: string; workspace: string | null }> {
  const run = await loadRun({ runId });
  const branch = taskBranchName(run.branch, taskId);
  const local = lane !== null && sandboxKind() === "local";
  let released: Promise<unknown> | null = null;
  const sandbox = (async (): Promise<{ baseSha: string; workspace: string | null; sandbox: Sandbox | null }> => {
    if (previousTaskId && local && previous?.workspace === lane) {
      // The lane's worktree, handed on: one checkout (the branch cut at the round's start) and one clean.
      const from = runSandbox(run, previousTaskId, lane);
      const handed = await repointSandbox(from, { branch, startSha: previous.baseSha });
      if (handed) return { baseSha: previous.baseSha, workspace: lane, sandbox: handed };
      await releaseSandbox(from).catch(() => null);
    } else if (previousTaskId) {
      // Not handed on: the task before's sandbox goes side by side with this task's start (another worktree, another
      // branch); the step ends only once it is gone (quiet when it is gone already).
      released = releaseSandbox(runSandbox(run, previousTaskId, previous?.workspace ?? null)).catch(() => null);
    }
    // A run after a conflict starts afresh: the first run's worktree goes before the branch is cut again.
    if (n > 1) await releaseSandbox(runSandbox(run, taskId)).catch(() => null);
    if (local) {
      const fresh = await startTaskSandbox(await sandboxOptions(run, taskId, lane));
      return { baseSha: fresh.baseSha, workspace: lane, sandbox: fresh };
    }
    return { baseSha: await cutTaskBranch({ repoPath: run.repoPath, runBranch: run.branch, branch }), workspace: null, sandbox: null };
  })();
  // Awaited below; a failure meanwhile (while the dependencies are read) is not an unhandled rejection.
  sandbox.catch(() => null);
  let starting: Promise<ImplementerState> | null = null;
  try {
    const task = doc.tasks.find((t) => t.id === taskId);
    const dependencies = await dependencySummary(runId, run.repoPath, task?.dependsOn ?? []);
    // The starting state side by side with the sandbox (the session's MCP servers, if any, wait for it).
    starting = beginImplementation({
      runId,
      plan: doc,
      request,
      feedback,
      maxIterations,
      task: { id: taskId, dependencies },
      memory,
      sandbox: async () => {
        const made = await sandbox;
        return made.sandbox ?? attachSandbox(runSandbox(run, taskId, made.workspace));
      },
    });
    const [{ baseSha, workspace }, state] = await Promise.all([sandbox, starting]);
    await append(runId, stepKey, [{ type: "TASK_BRANCH_CREATED", payload: { taskId, branch, baseSha, run: n, round, ...(workspace ? { workspace } : {}) } }]);
    return { state, branch, baseSha, workspace };
  } finally {
    await Promise.all([sandbox.catch(() => null), (starting as Promise<unknown> | null)?.catch(() => null)]);
    await released;
  }
}

export type TaskMerge = { taskId: string; branch: string } & (
  | { status: "merged"; sha: string }
  | { status: "conflict"; files: string[]; sides: ConflictSide[] }
);

/**
 * Finished tasks merged into the run branch, one after another in the order given (plan order) — in one step however
 * many tasks it takes (inngest/run/tasks.ts: the tasks that ended, in plan order, while other tasks may still run).
 * Their sandboxes are not touched: a merge reads only refs, and each lane releases its tasks' sandboxes itself, side by
 * side with the merge. The merged tasks' tasks.md boxes are checked in one commit on top of the merges, and the run
 * branch moves once, to that commit (mergeTaskBranches). A conflict changes nothing; `next` is what the run does about
 * it (recorded with the conflict). Safe to run again: a task already merged reads as merged (its merge commit), and the
 * events are written once.
 */
export async function mergeTasks({
  runId,
  stepKey,
  plan: doc,
  tasks,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  /** `workspace`: the sandbox the task's session used (its lane's; none: the task's own). */
  tasks: Array<{ taskId: string; next: "rerun" | "gate"; workspace?: string | null }>;
}): Promise<WithNow<{ merges: TaskMerge[]; kept: string[] }>> {
  const run = await loadRun({ runId });
  const workspaceOf = new Map(tasks.map((t) => [t.taskId, t.workspace ?? null]));
  // A re-run of this step after a crash: a task merged (and its branch deleted) by the first run reads as merged.
  const recorded = new Map<string, string>();
  const gone = new Set<string>();
  /** The tasks this step's first run recorded (merged or conflicting), if it got that far: the re-run takes exactly them. */
  const mine: Array<{ taskId: string; next: "rerun" | "gate" }> = [];
  for (const e of await listEvents({ runId, limit: 100_000 })) {
    if (e.type === "TASK_MERGED") recorded.set(e.payload.taskId, e.payload.commitSha);
    if ((e.type === "TASK_MERGED" || e.type === "TASK_MERGE_CONFLICT") && (e.payload as { stepKey?: string }).stepKey === stepKey) {
      mine.push({ taskId: e.payload.taskId, next: e.type === "TASK_MERGE_CONFLICT" ? e.payload.next : "rerun" });
    }
  }
  // Its events are written once (a step's events are not written again): the tasks it takes now must be the same.
  if (mine.length) tasks = mine;
  const withBranch = tasks.map((t) => ({ ...t, branch: taskBranchName(run.branch, t.taskId) }));
  const tips = await Promise.all(withBranch.map((t) => (recorded.has(t.taskId) ? resolveCommit(run.repoPath, `refs/heads/${t.branch}`) : "")));
  withBranch.forEach((t, i) => tips[i] === null && gone.add(t.taskId));
  const toMerge = withBranch.filter((t) => !gone.has(t.taskId)).map((t) => ({ ...t, title: doc.tasks.find((d) => d.id === t.taskId)?.title ?? t.taskId }));
  const resultOf = (results: TaskMergeResult[], taskId: string): TaskMergeResult =>
    gone.has(taskId) ? { status: "merged", sha: recorded.get(taskId)! } : results[toMerge.findIndex((m) => m.taskId === taskId)]!;
  const results = await mergeTaskBranches({
    repoPath: run.repoPath,
    runBranch: run.branch,
    runId,
    tasks: toMerge,
    // The merged tasks' tasks.md boxes, checked in one commit on top of the merges.
    onTop: async ({ tree, results }) => {
      const merged = withBranch.filter((t) => resultOf(results, t.taskId).status !== "conflict").map((t) => t.taskId);
      return checkedTasksFile(run, doc, merged, tree);
    },
  });
  const outcomes = withBranch.map((t) => ({ ...t, merged: resultOf(results, t.taskId) }));
  const events: NewRunEvent[] = [];
  const merges: TaskMerge[] = [];
  for (const { taskId, branch, next, merged } of outcomes) {
    if (merged.status === "conflict") {
      const files = merged.files.map((f) => redact(f));
      const sides = merged.sides.map((s) => ({ path: redact(s.path), runBranch: s.runBranch === null ? null : redact(s.runBranch), task: s.task === null ? null : redact(s.task) }));
      events.push({ type: "TASK_MERGE_CONFLICT", payload: { taskId, branch, files, next } });
      merges.push({ taskId, branch, status: "conflict", files, sides });
      continue;
    }
    // On record already (a re-run of the step after a crash): its merge stands as recorded.
    const sha = recorded.get(taskId) ?? merged.sha;
    if (!recorded.has(taskId)) events.push({ type: "TASK_MERGED", payload: { taskId, branch, commitSha: sha } });
    merges.push({ taskId, branch, status: "merged", sha });
  }
  if (events.length) await append(runId, stepKey, events);
  // A merged task's branch goes (its commits are on the run branch), once its merge is on record — unless its worktree
  // is still there (its lane releases it meanwhile, and a release attached afresh reads the branch): then it is `kept`
  // for the attempt's end (finishTasks).
  const merged = merges.filter((m) => m.status === "merged");
  const held = new Set(merged.filter((m) => hasWorkspace(workspaceOf.get(m.taskId) ?? taskSandboxId(runId, m.taskId))).map((m) => m.branch));
  await deleteTaskBranches({ repoPath: run.repoPath, branches: merged.map((m) => m.branch).filter((b) => !held.has(b)) });
  return { merges, kept: [...held], now: workflowClock.now() };
}

/**
 * A task whose session ended at an approved re-plan: its worktree (its lane's, `workspace`: the lane takes no further
 * task) and branch go (a later run cuts them afresh).
 */
export async function dropTask({ runId, taskId, workspace = null }: { runId: string; taskId: string; workspace?: string | null }) {
  const run = await loadRun({ runId });
  await releaseSandbox(runSandbox(run, taskId, workspace)).catch(() => null);
  await deleteTaskBranch({ repoPath: run.repoPath, branch: taskBranchName(run.branch, taskId) });
  return { now: workflowClock.now() };
}

/**
 * The attempt's outcome once every round is done: succeeded at the run branch's tip, or failed with the reason. The
 * merged tasks' branches a merge step kept (their worktrees were still being released) go now, side by side.
 */
export async function finishTasks({
  runId,
  stepKey,
  attempt,
  failure,
  kept = [],
}: {
  runId: string;
  stepKey: string;
  attempt: number;
  failure: string | null;
  kept?: string[];
}) {
  const run = await loadRun({ runId });
  const deleted = deleteTaskBranches({ repoPath: run.repoPath, branches: kept }).catch(() => null);
  if (failure) {
    await append(runId, stepKey, [{ type: "IMPLEMENTATION_FAILED", payload: { attempt, reason: redact(failure) } }]);
  } else {
    const tip = await resolveCommit(run.repoPath, `refs/heads/${run.branch}`);
    await append(runId, stepKey, [{ type: "IMPLEMENTATION_SUCCEEDED", payload: { attempt, commitSha: tip } }]);
  }
  await deleted;
  return { now: workflowClock.now() };
}
