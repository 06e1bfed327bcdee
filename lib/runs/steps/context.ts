import { eq } from "drizzle-orm";
import { NonRetriableError } from "inngest";
import { getDb, write } from "@/lib/db";
import { projects, workflowRuns } from "@/lib/db/schema";
import { appendEvents, appendEventsTx, findStepEvents, getRunState, listEvents, rowToState } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { getEnv } from "@/lib/env";
import { singleLine } from "@/lib/plain-text";
import { githubConfigured } from "@/lib/github/app";
import { cachePath } from "@/lib/github/git";
import { TERMINAL_STATUSES, type NewRunEvent, type RunConfig, type RunState } from "@/lib/workflow";

/*
 * The run workflow's side effects live in lib/runs/steps/, one module per stage. Each exported step function is the
 * body of ONE durable step: it takes and returns plain JSON, and it is safe to run again after a crash (events are keyed
 * by the step, commits and model calls are idempotent), so a finished step never repeats and an interrupted one never
 * doubles its effects.
 *
 * This module is what every stage shares: the run as a step loads it, appending its events, the clock and the step's
 * time budget, and the one "run ended" signal (RunEndedError).
 */

/**
 * The clock behind every `now` a step returns (stage deadlines are computed from these memoized values). A seam for
 * tests: they move this clock forward instead of sleeping through a stage timeout.
 */
export const workflowClock = { now: (): number => Date.now() };

export type RunContext = {
  runId: string;
  userId: string;
  projectId: string;
  request: string;
  config: RunConfig;
  status: RunState["status"];
  branch: string;
  /** The repository git works on: a local project's own, or a GitHub project's cache clone (lib/github/git.ts). */
  repoPath: string;
  /** Set for GitHub projects: delivery pushes there and opens a pull request. */
  github: { owner: string; repo: string; installationId?: number } | null;
};

/**
 * Thrown inside a step when the run has already ended (e.g. cancelled meanwhile). Not retriable: nothing more is to be
 * done for this run, and the failure handler only records what happened.
 */
export class RunEndedError extends NonRetriableError {
  constructor(readonly status: string) {
    super(`The run has ended (${status}).`);
    this.name = "RunEndedError";
  }
}

export async function loadRun({ runId }: { runId: string }): Promise<RunContext> {
  const run = await getRunState({ id: runId });
  if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  const db = await getDb();
  const project = await db.query.projects.findFirst({ where: eq(projects.id, run.projectId) });
  if (!project) throw new AppError("not_found:project", `Project ${run.projectId} does not exist.`);
  const repository = project.repository;
  if (repository.type === "github" && !githubConfigured()) {
    throw new AppError("unavailable:github", "This project is bound to GitHub, and GitHub delivery is not configured on this server.");
  }
  const github = repository.type === "github" ? { owner: repository.owner, repo: repository.repo, installationId: repository.installationId } : null;
  return {
    runId,
    userId: run.userId,
    projectId: run.projectId,
    request: run.originalRequest,
    config: run.config as unknown as RunConfig,
    status: run.status,
    branch: run.branch!,
    repoPath: repository.type === "github" ? cachePath(repository) : repository.path,
    github,
  };
}

/**
 * model_calls.step_key is unique across ALL runs (it is what makes a re-run step record nothing twice), and every run
 * has the same step names: the run id makes the key the run's own. Without it a run's calls were silently dropped
 * whenever an earlier run had made the same step's call.
 */
export const modelCallKey = (runId: string, stepKey: string) => `${runId}/${stepKey}`;

/**
 * Append a step's events (once per step key). A step of a run that has ended meanwhile (cancelled) gets RunEndedError;
 * a step re-run after a crash whose events are already stored (e.g. `complete`, whose own event ended the run) gets
 * them as a duplicate. `afterEnd` is for what may follow a completed run (a merge a person decided): the reducer still
 * says what is legal, and a re-run step still writes nothing twice. Through appendEvents: on a file database the
 * native writer's prepared statements in a group commit, not a Drizzle transaction of its own (a few ms per step).
 */
export async function append(
  runId: string,
  stepKey: string,
  events: NewRunEvent[],
  {
    afterEnd = false,
    guard,
  }: {
    afterEnd?: boolean;
    /** Checks the run's state in the write's transaction (before anything is written; not on a re-run's duplicate):
     * such an append is a Drizzle transaction of its own, not the group commit. */
    guard?: (state: RunState) => void;
  } = {},
) {
  // The common case: the native writer's group commit. A `guard` reads the run's state in the write's own transaction.
  if (!guard) return appendEvents(runId, events, afterEnd ? { stepKey } : { stepKey, ended: (status) => new RunEndedError(status) });
  return write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && ((!afterEnd && TERMINAL_STATUSES.has(current.status as RunState["status"])) || guard)) {
      // A step re-run after a crash whose events are already stored (e.g. `complete`, whose own event ended the run)
      // is a duplicate, not a step of an ended run.
      const existing = await findStepEvents(tx, runId, stepKey);
      if (existing.length > 0) return { state: rowToState(current), events: existing, duplicate: true };
      if (!afterEnd && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
      guard?.(rowToState(current));
    }
    return appendEventsTx(tx, runId, events, { stepKey });
  });
}

/** A step's result carries the time it finished (from workflowClock), so stage deadlines replay deterministically. */
export type WithNow<T> = T & { now: number };

/** What a waiting run reads when it checks a stored decision: still pending, ended with the run, or done (with it). */
export type WaitResult<T> = { state: "pending" } | { state: "ended"; status: string } | ({ state: "done" } & T);

/**
 * How long one implementer step may work: the host's step duration limit (GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS) less a
 * margin for what the step does after its model call and commands (events, checkpoint commits, the conversation) and
 * for the call's own overhead. Replaceable for tests, like workflowClock.
 */
export const stepBudget = {
  ms: (): number => {
    const limit = getEnv().GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS * 1000;
    return Math.max(1000, limit - Math.min(30_000, Math.round(limit / 5)));
  },
};

/** The request's first line that says something: a run's title in commits, specs and memory. */
export function firstLine(text: string): string {
  return singleLine(text.split("\n").find((l) => singleLine(l)) ?? "request").slice(0, 80) || "request";
}

/** The pull request review this run follows up on (RUN_CREATED.followUp), or null for a run of its own. */
export async function followUpOf({ runId }: { runId: string }) {
  const [created] = await listEvents({ runId, limit: 1 });
  return created?.type === "RUN_CREATED" ? (created.payload.followUp ?? null) : null;
}

/** The commit the run branch was created from (BRANCH_CREATED), or null before there is a branch. */
export async function baseShaOf(runId: string): Promise<string | null> {
  const events = await listEvents({ runId, limit: 50 });
  const created = events.find((e) => e.type === "BRANCH_CREATED");
  return created?.type === "BRANCH_CREATED" ? (created.payload.baseSha ?? null) : null;
}
