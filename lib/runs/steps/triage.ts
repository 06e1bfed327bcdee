import { and, eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { eventTypeIn } from "@/lib/db/event-store";
import { workflowEvents } from "@/lib/db/schema";
import { redact } from "@/lib/redact";
import { triageTask, type TriageEvidence, type TriageResult } from "@/lib/agents/triage";
import { attachSandbox, hasWorkspace } from "@/lib/sandbox";
import { git, rollbackToCheckpoint } from "@/lib/git";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { append, loadRun } from "./context";
import { checkTasksFile } from "./tasks-file";
import { sandboxOptions } from "./workspace";

/* Triage, once before the first implementation: tasks the repository already does are skipped. */

/** How long one triage check may run. */
const TRIAGE_CHECK_MS = 120_000;

/**
 * Triage (lib/agents/triage.ts): each task's own checks run in the sandbox and its files are looked for; a task found
 * done at or above `triage.threshold` is skipped (TASK_TRIAGED, and checked in the run's tasks.md). What the checks
 * leave in the workspace is dropped, so the first checkpoint holds only the implementer's work.
 */
export async function triage({ runId, plan: doc }: { runId: string; plan: PlanDocument }): Promise<{ skip: Array<{ id: string; evidence: string[] }> }> {
  const run = await loadRun({ runId });
  // A run already implementing (its workflow replayed by a newer server) is not triaged: it would disturb its work.
  if (await implementationStarted(runId)) return { skip: [] };
  const threshold = run.config.triage?.threshold ?? 0.8;
  const candidates = doc.tasks.filter((t) => (t.checks ?? []).length || (t.files ?? []).length);
  if (!candidates.length) return { skip: [] };
  let results: TriageResult[] | null = null;
  if (!candidates.some((t) => (t.checks ?? []).length) && !(await hasWorkspace(runId))) {
    // Nothing to run and no workspace yet: the files are looked up in the run branch's tree, which is exactly what a
    // sandbox checked out now would hold (no worktree made, no sandboxed process). Null: the tree cannot tell.
    const present = await filesInBranch(run, candidates.flatMap((t) => t.files ?? []));
    if (present) {
      results = candidates.map((task) => {
        const files = (task.files ?? []).map((path) => ({ path, present: present.get(path)! }));
        return triageTask({ taskId: task.id, evidence: { checks: [], files }, threshold });
      });
    }
  }
  if (!results) {
    results = [];
    const sandbox = await attachSandbox(await sandboxOptions(run));
    for (const task of candidates) {
      const checks: TriageEvidence["checks"] = [];
      for (const command of task.checks ?? []) {
        const r = await sandbox.exec("sh", ["-c", command], { timeoutMs: TRIAGE_CHECK_MS });
        checks.push({ command, exitCode: r.timedOut ? null : r.exitCode, output: redact(`${r.stdout}\n${r.stderr}`) });
      }
      const files = await filesPresent(sandbox, task.files ?? []);
      results.push(triageTask({ taskId: task.id, evidence: { checks, files }, threshold }));
    }
    // Checks may have changed the workspace; presence tests alone do not (and resetting costs several git calls).
    if (candidates.some((t) => (t.checks ?? []).length)) await rollbackToCheckpoint({ sandbox }).catch(() => null);
    const skipped = results.filter((r) => r.skipped);
    await checkTasksFile(run, doc, skipped.map((r) => r.taskId), sandbox);
  } else {
    // Without checks nothing reaches the threshold's default; a lower threshold may skip a task on its files alone.
    await checkTasksFile(run, doc, results.filter((r) => r.skipped).map((r) => r.taskId));
  }
  const skipped = results.filter((r) => r.skipped);
  const verdicts: NewRunEvent[] = results
    .filter((r) => r.confidence > 0)
    .map((r) => ({ type: "TASK_TRIAGED", payload: { taskId: r.taskId, confidence: r.confidence, evidence: r.evidence, skipped: r.skipped } }));
  if (verdicts.length) await append(runId, "triage", verdicts);
  return { skip: skipped.map((r) => ({ id: r.taskId, evidence: r.evidence })) };
}

/** Whether the run's implementation stage has started: one read of the (run, type) index, not of the whole log. */
async function implementationStarted(runId: string): Promise<boolean> {
  const db = await getDb();
  const rows = await db
    .select({ sequence: workflowEvents.sequence })
    .from(workflowEvents)
    .where(
      and(
        eq(workflowEvents.workflowRunId, runId),
        eventTypeIn(["STAGE_STARTED"]),
        sql`json_extract(${workflowEvents.payload}, '$.stage') = 'implementation'`,
      ),
    )
    .limit(1);
  return rows.length > 0;
}

/** A plain relative path (no `.`, `..` or empty segment, not inside `.git`): one the branch's tree can answer for. */
const plainPath = (p: string) => {
  const segments = p.split("/");
  return p !== "" && segments[0] !== ".git" && segments.every((s) => s !== "" && s !== "." && s !== "..");
};

/**
 * Whether each path is present in a fresh checkout of the run branch, as `test -e` in it would say, from one
 * `git ls-tree` of the paths and their parents: present when the tree has it and no part of it is a symbolic link.
 * Null when any path is not plain, or a symbolic link or submodule is on its way (what it points at is the
 * filesystem's to say), or the branch cannot be read: the caller asks the sandbox instead.
 */
async function filesInBranch(run: { repoPath: string; branch: string }, paths: string[]): Promise<Map<string, boolean> | null> {
  const stripped = new Map(paths.map((p) => [p, p.replace(/\/+$/, "")]));
  if (![...stripped.values()].every(plainPath)) return null;
  const queried = new Set<string>();
  for (const p of stripped.values()) {
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
  for (const [original, p] of stripped) {
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
 * Which of a task's files are present in the workspace: one shell for all of them (one `test -e` per file, in order)
 * instead of a process per file. A run that fails or times out counts every file it did not report as missing.
 */
async function filesPresent(
  sandbox: { exec(cmd: string, args: string[], opts: { timeoutMs: number }): Promise<{ exitCode: number | null; stdout: string; timedOut?: boolean }> },
  paths: string[],
): Promise<TriageEvidence["files"]> {
  if (!paths.length) return [];
  const r = await sandbox.exec("sh", ["-c", 'for f do if test -e "$f"; then echo 1; else echo 0; fi; done', "sh", ...paths.map((p) => p.replace(/\/+$/, ""))], {
    timeoutMs: 10_000,
  });
  const answers = r.timedOut ? [] : r.stdout.split("\n");
  return paths.map((path, i) => ({ path, present: answers[i] === "1" }));
}
