import { existsSync } from "node:fs";
import { and, eq, inArray, lte, ne, notInArray, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { projects, workflowEvents, workflowRuns } from "@/lib/db/schema";
import { appendEvents, eventTypeIn } from "@/lib/db/event-store";
import { getEnv } from "@/lib/env";
import { git, resolveCommit } from "@/lib/git";
import { cachePath } from "@/lib/github/git";
import { log } from "@/lib/log";
import { removeRunWorktree } from "@/lib/sandbox";

/*
 * The cleanup sweep: a run that failed or was cancelled leaves its branch (and, when it stopped mid-step, its worktree)
 * behind. `GATEHOUSE_CLEANUP_AFTER_DAYS` after it ended, the sweep deletes both and records RUN_CLEANED_UP, so a run is
 * swept once. Only the local side is touched: the project's repository, or a GitHub project's cache clone. A branch on
 * GitHub (and a draft pull request on it) is left for people to close; deleting it could drop a pull request someone
 * still reads.
 */

const DAY_MS = 24 * 60 * 60_000;
const ENDED = ["failed", "cancelled"] as const;

export type SweptRun = { runId: string; branch: string | null; branchDeleted: boolean; worktreeRemoved: boolean };

export async function sweepEndedRuns({
  now = Date.now(),
  days = getEnv().GATEHOUSE_CLEANUP_AFTER_DAYS,
}: {
  /** The sweep's clock (tests pass a fake one). */
  now?: number;
  days?: number;
} = {}): Promise<{ swept: SweptRun[] }> {
  if (days <= 0) return { swept: [] };
  const db = await getDb();
  const cutoff = new Date(now - days * DAY_MS);
  const cleaned = db.select({ id: workflowEvents.workflowRunId }).from(workflowEvents).where(eventTypeIn(["RUN_CLEANED_UP"]));
  const due = await db
    .select({ id: workflowRuns.id, projectId: workflowRuns.projectId, branch: workflowRuns.branch })
    .from(workflowRuns)
    .where(and(inArray(workflowRuns.status, [...ENDED]), lte(workflowRuns.completedAt, cutoff), notInArray(workflowRuns.id, cleaned)))
    .limit(500);
  const swept: SweptRun[] = [];
  for (const run of due) {
    try {
      swept.push(await sweepRun(run, days));
    } catch (error) {
      // One run's trouble (a repository moved away, a locked ref) must not stop the others; the next sweep retries it.
      log.warn("cleanup sweep could not clean a run", { runId: run.id, error: String(error) });
    }
  }
  if (swept.length) log.info("cleanup sweep removed what ended runs left behind", { runs: swept.length, olderThanDays: days });
  return { swept };
}

async function sweepRun(run: { id: string; projectId: string; branch: string | null }, days: number): Promise<SweptRun> {
  const db = await getDb();
  const project = await db.query.projects.findFirst({ where: eq(projects.id, run.projectId) });
  const repo = project?.repository;
  const repoPath = !repo ? null : repo.type === "local" ? repo.path : cachePath({ owner: repo.owner, repo: repo.repo });
  let worktreeRemoved = false;
  let branchDeleted = false;
  if (repoPath && existsSync(repoPath)) {
    worktreeRemoved = await removeRunWorktree({ runId: run.id, repoPath });
    if (run.branch && (await branchIsOnlyThisRuns(run))) {
      const existed = await resolveCommit(repoPath, `refs/heads/${run.branch}`);
      // `git branch -D` refuses a branch checked out anywhere (a person's own checkout): then it stays.
      if (existed) branchDeleted = (await git(repoPath, ["branch", "-D", run.branch], { allowFailure: true })).code === 0;
    }
  }
  await appendEvents(run.id, [{ type: "RUN_CLEANED_UP", payload: { branch: run.branch, branchDeleted, worktreeRemoved, olderThanDays: days } }]);
  log.info("cleaned up an ended run", { runId: run.id, branch: run.branch, branchDeleted, worktreeRemoved });
  return { runId: run.id, branch: run.branch, branchDeleted, worktreeRemoved };
}

/** A follow-up run continues an earlier run's branch: the branch goes only when no other run that shares it still lives. */
async function branchIsOnlyThisRuns(run: { id: string; projectId: string; branch: string | null }): Promise<boolean> {
  const db = await getDb();
  const [row] = await db
    .select({ n: sql<number>`count(*)` })
    .from(workflowRuns)
    .where(
      and(
        eq(workflowRuns.projectId, run.projectId),
        eq(workflowRuns.branch, run.branch!),
        ne(workflowRuns.id, run.id),
        notInArray(workflowRuns.status, [...ENDED]),
      ),
    );
  return (row?.n ?? 0) === 0;
}

/** Sweep now and then once a day, for the life of the process (started by instrumentation.ts). */
export function startCleanupSweeps({ firstAfterMs = 60_000 }: { firstAfterMs?: number } = {}): () => void {
  if (getEnv().GATEHOUSE_CLEANUP_AFTER_DAYS <= 0) return () => {};
  const sweep = () => {
    sweepEndedRuns().catch((error: unknown) => log.warn("cleanup sweep failed", { error: String(error) }));
  };
  const first = setTimeout(sweep, firstAfterMs);
  const daily = setInterval(sweep, DAY_MS);
  // Neither keeps the process alive on shutdown.
  first.unref();
  daily.unref();
  return () => {
    clearTimeout(first);
    clearInterval(daily);
  };
}
