import { and, asc, eq, inArray, ne, sql } from "drizzle-orm";
import type { EditedPlan } from "./plan-edits";
import { NonRetriableError } from "inngest";
import { getDb, write } from "@/lib/db";
import { artifacts, clarificationRequests, gates, projects, workflowRuns } from "@/lib/db/schema";
import { approvedPlanHash, planHash } from "@/lib/workflow/plan-hash";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { appendEventsTx, findStepEvents, getRunState, listEvents, rowToState } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { getEnv } from "@/lib/env";
import { newId } from "@/lib/ids";
import { redact, redactDeep } from "@/lib/redact";
import { describeLeaks, scanChangesForSecrets, withheldPaths } from "./secret-scan";
import { log } from "@/lib/log";
import { singleLine } from "@/lib/plain-text";
import { githubConfigured } from "@/lib/github/app";
import { cachePath } from "@/lib/github/git";
import { contextWindowOf, isModelCallError } from "@/lib/ai";
import {
  answerClarification as answerImplementerClarification,
  applyDebugReplan,
  applyPolicyDecision,
  applyReplanDecision,
  collectCommand,
  implementerTurn,
  PlannerError,
  reopenTask,
  runDebugger,
  StepBudgetExceededError,
  runPlanner,
  runValidateStep,
  startImplementer,
  waitDetached,
  type ClarificationResponseType,
  type DebugVerdict,
  type ImplementerState,
  type ImplementerTurnResult,
  type Plan,
  type PlannerResult,
  type PlannerRetry,
  type PolicyAction,
  type PromptInfo,
  type VerifyFailure,
  type ValidationProgress,
} from "@/lib/agents";
import { outputTail } from "@/lib/agents/debugger";
import { extractConstraints, validateMermaid } from "@/lib/mermaid";
import { acknowledgeDecision, decisionKey, waitCheckHooks } from "./gates/acks";
import { loadConversation, storeConversation } from "./conversation";
import { checkTask, PASTED_TASKS_MD_PATH, pastedTasksMd, planFromTasksMd, TASKS_MD_PATHS } from "@/lib/agents/tasks-md";
import { triageTask, type TriageEvidence, type TriageResult } from "@/lib/agents/triage";
import { attachSandbox, releaseSandbox, restoreSandbox, type CreateSandboxOptions } from "@/lib/sandbox";
import {
  buildRunContext,
  clarificationFromRow,
  commitCheckpoint,
  commitRunRecords,
  commitSpec,
  commitWorkInProgress,
  createRunBranch,
  DIFF_SAFE,
  commitFiles,
  commitMessage,
  git,
  lastCheckpoint,
  readFileAt,
  readLatestMemory,
  readProjectConfig,
  rollbackToCheckpoint,
  squashMerge,
  updateMemory,
  type WorktreeLocation,
} from "@/lib/git";
import { deadlineFor } from "./deadlines";
import {
  TERMINAL_STATUSES,
  type DecisionDeadlineInfo,
  type GateKind,
  type NewRunEvent,
  type PlanDocument,
  type RunConfig,
  type RunState,
  type Stage,
} from "@/lib/workflow";

/*
 * The run workflow's side effects. Each function is the body of ONE durable step: it takes and returns plain JSON, and
 * it is safe to run again after a crash (events are keyed by the step, commits and model calls are idempotent), so a
 * finished step never repeats and an interrupted one never doubles its effects.
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
 * Append a step's events (once per step key). `afterEnd` is for what may follow a completed run (a merge a person
 * decided): the reducer still says what is legal, and a re-run step still writes nothing twice.
 */
export async function append(runId: string, stepKey: string, events: NewRunEvent[], { afterEnd = false }: { afterEnd?: boolean } = {}) {
  return write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && !afterEnd && TERMINAL_STATUSES.has(current.status as RunState["status"])) {
      // A step re-run after a crash whose events are already stored (e.g. `complete`, whose own event ended the run)
      // is a duplicate, not a step of an ended run.
      const existing = await findStepEvents(tx, runId, stepKey);
      if (existing.length > 0) return { state: rowToState(current), events: existing, duplicate: true };
      throw new RunEndedError(current.status);
    }
    return appendEventsTx(tx, runId, events, { stepKey });
  });
}

/**
 * The run's sandbox options, with the repository's `.autonomous/config.json` applied every time (excluded paths, and
 * outbound network only when it sets sandbox.allowInternet), so a sandbox recreated after a restart or a pause commits
 * and compares exactly what the first one did.
 */
async function sandboxOptions(run: RunContext): Promise<CreateSandboxOptions & { branch: string }> {
  const file = await readProjectConfig({ repoPath: run.repoPath, ref: run.branch }).catch(() => ({ excludePaths: [] as string[], allowInternet: false }));
  return {
    runId: run.runId,
    repoPath: run.repoPath,
    ref: run.branch,
    branch: run.branch,
    excludePaths: file.excludePaths,
    allowInternet: file.allowInternet,
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Start

/**
 * The per-user limit counts runs that are computing. A run waiting for a person (a gate, a question, a paused run
 * waiting for retry) holds no slot: five plans left waiting for days never block a sixth run.
 */
const COMPUTING: RunState["status"][] = ["running"];

/** The concurrency limit a run is admitted under: the server's per-user limit, or the run's own lower one. */
function concurrencyLimit(config: unknown): { limit: number; name: string } {
  const server = getEnv().MAX_CONCURRENT_RUNS_PER_USER;
  const own = (config as { limits?: { maxConcurrency?: number } } | null)?.limits?.maxConcurrency;
  return typeof own === "number" && own < server
    ? { limit: own, name: `this run's limits.maxConcurrency=${own}` }
    : { limit: server, name: `MAX_CONCURRENT_RUNS_PER_USER=${server}` };
}

/**
 * Start the run if its user is under MAX_CONCURRENT_RUNS_PER_USER computing runs; otherwise it stays queued. Checked
 * and written in one transaction, so two runs never take the last slot together.
 */
export async function tryStart({ runId, stepKey = "start" }: { runId: string; stepKey?: string }): Promise<{ started: boolean; status: string }> {
  const result = await write(async (tx): Promise<{ started: boolean; status: string }> => {
    const run = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
    const { limit } = concurrencyLimit(run.config);
    if (run.status !== "queued") return { started: run.status !== "cancelled" && run.status !== "failed", status: run.status };
    const [row] = await tx
      .select({ n: sql<number>`count(*)` })
      .from(workflowRuns)
      .where(and(eq(workflowRuns.userId, run.userId), inArray(workflowRuns.status, COMPUTING)));
    if ((row?.n ?? 0) >= limit) return { started: false, status: "queued" };
    await appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }], { stepKey });
    return { started: true, status: "running" };
  });
  if (!result.started && result.status === "queued") await waitCheckHooks.afterPending?.({ runId, key: "slot" });
  return result;
}

/**
 * Whether waking the user's queued runs is over: none of them could start now (there is none, or every one is at its
 * limit). The re-announcer repeats a `run/slot-freed` until then, because a run that read "full" just before a slot
 * freed stores its wait after the announcement, and Inngest's waits do not look back.
 */
export async function slotWakeSettled({ userId }: { userId: string }): Promise<boolean> {
  const db = await getDb();
  const queued = await db.query.workflowRuns.findMany({ where: and(eq(workflowRuns.userId, userId), eq(workflowRuns.status, "queued")) });
  if (queued.length === 0) return true;
  const [row] = await db
    .select({ n: sql<number>`count(*)` })
    .from(workflowRuns)
    .where(and(eq(workflowRuns.userId, userId), inArray(workflowRuns.status, COMPUTING)));
  return queued.every((run) => (row?.n ?? 0) >= concurrencyLimit(run.config).limit);
}

/**
 * After a wait for a person, before computing again: a run whose user already has the limit's worth of other runs
 * computing goes back to the queue (RUN_QUEUED, with the reason shown on its page) until a slot frees.
 */
export async function requeueIfFull({ runId, stepKey }: { runId: string; stepKey: string }): Promise<{ queued: boolean; userId: string }> {
  return write(async (tx) => {
    const run = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
    const { limit, name } = concurrencyLimit(run.config);
    if (run.status !== "running") return { queued: false, userId: run.userId };
    const [row] = await tx
      .select({ n: sql<number>`count(*)` })
      .from(workflowRuns)
      .where(and(eq(workflowRuns.userId, run.userId), inArray(workflowRuns.status, COMPUTING), ne(workflowRuns.id, runId)));
    const computing = row?.n ?? 0;
    if (computing < limit) return { queued: false, userId: run.userId };
    const reason = `Waiting for a free slot: ${computing} of this user's runs are computing (${name}).`;
    await appendEventsTx(tx, runId, [{ type: "RUN_QUEUED", payload: { reason } }], { stepKey });
    return { queued: true, userId: run.userId };
  });
}

/** The pull request review this run follows up on (RUN_CREATED.followUp), or null for a run of its own. */
export async function followUpOf({ runId }: { runId: string }) {
  const [created] = await listEvents({ runId, limit: 1 });
  return created?.type === "RUN_CREATED" ? (created.payload.followUp ?? null) : null;
}

export async function createBranch({ runId }: { runId: string }) {
  const run = await loadRun({ runId });
  const followUp = await followUpOf({ runId });
  const { branch, baseSha } = await createRunBranch({
    repoPath: run.repoPath,
    runId,
    request: run.request,
    baseBranch: run.config.git.baseBranch,
    ...(followUp ? { existingBranch: run.branch } : {}),
  });
  await append(runId, "branch", [{ type: "BRANCH_CREATED", payload: { branch, baseSha } }]);
  return { branch, baseSha };
}

export async function startStage({ runId, stage, stepKey, attempt }: { runId: string; stage: Stage; stepKey: string; attempt?: number }) {
  await append(runId, stepKey, [{ type: "STAGE_STARTED", payload: { stage, attempt } }]);
  return { now: workflowClock.now() };
}

export async function completeStage({ runId, stage, stepKey }: { runId: string; stage: Stage; stepKey: string }) {
  await append(runId, stepKey, [{ type: "STAGE_COMPLETED", payload: { stage } }]);
  return { now: workflowClock.now() };
}

// ---------------------------------------------------------------------------------------------------------------------
// Planning

/** A step's result carries the time it finished (from workflowClock), so stage deadlines replay deterministically. */
type WithNow<T> = T & { now: number };

export type PlanStepResult =
  | WithNow<{ kind: "plan"; plan: PlanDocument; diagramsProduced: number; answer?: string }>
  | WithNow<{ kind: "timeout" }>
  | WithNow<Extract<PlannerResult, { kind: "clarification" }>>
  | WithNow<{ kind: "invalid"; message: string; diagramsProduced: number; /** The plan with its invalid diagram, to fix by hand. */ draft: PlanDocument | null }>
  | WithNow<{ kind: "model_error"; reason: string; message: string }>
  /**
   * The planner's model call had not answered when the step's time ran out: the call is made again in a fresh step,
   * as the retry it was when `retry` is set (not a model error, no pause).
   */
  | WithNow<{ kind: "step_budget"; retry: PlannerRetry | null }>;

export type PlanRetry = PlannerRetry;
export type { ValidationProgress };

async function repositoryFiles(repoPath: string, ref: string): Promise<string[]> {
  const out = await git(repoPath, ["ls-tree", "-r", "--name-only", ref], { allowFailure: true });
  return out.stdout.split("\n").filter(Boolean).slice(0, 2000);
}

export async function plan({
  runId,
  stepKey,
  feedback,
  clarifications,
  diagramAttempt,
  deadline,
  planQuestion,
  retry,
}: {
  runId: string;
  stepKey: string;
  feedback: string[];
  clarifications: Array<{ question: string; answer: string }>;
  diagramAttempt: number;
  /** The diagram retry an earlier step's budget cut (its `step_budget` result): made again, as a retry. */
  retry?: PlannerRetry | null;
  /** "Ask back": a person's question about `plan`; the planner answers it and revises the plan. */
  planQuestion?: { question: string; plan: PlanDocument };
  /** The planning stage's deadline (epoch ms): the model call is aborted when it passes, and the step says timeout. */
  deadline?: number;
}): Promise<PlanStepResult> {
  if (deadline !== undefined && workflowClock.now() > deadline) return { kind: "timeout", now: workflowClock.now() };
  const run = await loadRun({ runId });
  const fromTasks = await planFromTasksFile(run);
  if (fromTasks) return { ...fromTasks, now: workflowClock.now() };
  const memory = await readLatestMemory({ repoPath: run.repoPath, ref: run.branch });
  const stage = stageSignal(runId, deadline);
  // Real time, not workflowClock: the host cuts the call by the wall clock.
  const stepEndsAt = Date.now() + stepBudget.ms();
  try {
    const result = await runPlanner({
      input: {
        request: run.request,
        memory: memory.raw ?? undefined,
        clarifications,
        rejectionFeedback: feedback,
        repositoryFiles: await repositoryFiles(run.repoPath, run.branch),
        diagramAttempt,
        ...(planQuestion ? { planQuestion: { question: planQuestion.question, plan: describePlanDocument(planQuestion.plan) } } : {}),
        ...(retry ? { retry } : {}),
      },
      modelId: run.config.modelRouting.planner,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
      signal: stage.signal,
      stepEndsAt,
    });
    if (result.kind === "plan") {
      const answer = result.answer ? redact(result.answer) : undefined;
      return { kind: "plan", plan: toPlanDocument(result.plan), diagramsProduced: result.diagramsProduced, ...(answer ? { answer } : {}), now: workflowClock.now() };
    }
    return { ...result, now: workflowClock.now() };
  } catch (error) {
    if (stage.cancelled()) throw new RunEndedError((await endedStatus(runId)) ?? "cancelled");
    if (stage.overtime()) return { kind: "timeout", now: Math.max(workflowClock.now(), deadline ?? 0) + 1 };
    if (error instanceof StepBudgetExceededError) return { kind: "step_budget", retry: (error.resume as PlannerRetry | undefined) ?? null, now: workflowClock.now() };
    if (error instanceof PlannerError) {
      const draft = error.draft ? toPlanDocument({ ...error.draft, mermaid: error.mermaid }) : null;
      return { kind: "invalid", message: error.message, diagramsProduced: error.diagramsProduced, draft, now: workflowClock.now() };
    }
    if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
    throw error;
  } finally {
    stage.stop();
  }
}

/** A stored plan as the planner reads it back when a person asks about it. */
function describePlanDocument(doc: PlanDocument): string {
  const lines = [`Summary: ${doc.summary}`, "", "Tasks:"];
  for (const t of doc.tasks) {
    lines.push(`- ${t.id}: ${t.title}${t.dependsOn?.length ? ` (after ${t.dependsOn.join(", ")})` : ""}${t.files?.length ? ` [files: ${t.files.join(", ")}]` : ""}`);
  }
  lines.push("", "Acceptance criteria:", ...doc.acceptanceCriteria.map((c) => `- ${c.description}${c.command ? ` (\`${c.command}\`)` : ""}`));
  lines.push("", "Diagram:", doc.mermaid);
  return lines.join("\n");
}

/**
 * A run started from a tasks.md (config `tasks.source`): one pasted into the request (committed to the branch as
 * .autonomous/tasks.md, where its checkboxes are kept), or with `repository` tasks.md / .autonomous/tasks.md on the
 * branch. Its tasks are the plan; no planner call is made. Null: the planner plans.
 */
async function planFromTasksFile(run: RunContext): Promise<{ kind: "plan"; plan: PlanDocument; diagramsProduced: number } | { kind: "invalid"; message: string; diagramsProduced: number; draft: null } | null> {
  const source = run.config.tasks?.source ?? "auto";
  if (source === "none") return null;
  let found: { path: string; text: string } | null = null;
  const pasted = pastedTasksMd(run.request);
  if (pasted !== null) found = { path: PASTED_TASKS_MD_PATH, text: pasted };
  else if (source === "repository") {
    for (const path of TASKS_MD_PATHS) {
      const text = await readFileAt({ repoPath: run.repoPath, ref: run.branch, path });
      if (text !== null) {
        found = { path, text };
        break;
      }
    }
    if (!found) return { kind: "invalid", message: `tasks.source is "repository" but neither ${TASKS_MD_PATHS.join(" nor ")} is on the branch.`, diagramsProduced: 0, draft: null };
  }
  if (!found) return null;
  let plan: PlanDocument;
  try {
    plan = planFromTasksMd({ text: found.text, path: found.path, title: firstLine(run.request) });
    await validateMermaid(plan.mermaid);
  } catch (error) {
    if (error instanceof AppError) return { kind: "invalid", message: error.message, diagramsProduced: 0, draft: null };
    throw error;
  }
  if (pasted !== null) {
    await commitFiles({
      repoPath: run.repoPath,
      branch: run.branch,
      files: { [found.path]: found.text },
      message: commitMessage({ subject: `tasks.md for run ${run.runId}`, runId: run.runId, kind: "records" }),
    });
  }
  return { kind: "plan", plan, diagramsProduced: 0 };
}

/**
 * Check tasks in the run's tasks.md and commit it on the branch (a no-op when they already are). The sandbox gets the
 * new file too (an E2B sandbox is not the worktree), so the next checkpoint keeps the boxes.
 */
async function checkTasksFile(run: RunContext, doc: PlanDocument, taskIds: string[], sandbox?: { writeFile(path: string, content: string): Promise<void> }) {
  const path = doc.tasksFile?.path;
  if (!path || !taskIds.length) return;
  const text = await readFileAt({ repoPath: run.repoPath, ref: run.branch, path });
  if (text === null) return;
  let next = text;
  try {
    for (const id of taskIds) next = checkTask(next, id);
  } catch {
    // The implementer made the file unparseable: its checkboxes are left as they are.
    return;
  }
  if (next === text) return;
  await commitFiles({
    repoPath: run.repoPath,
    branch: run.branch,
    files: { [path]: next },
    message: commitMessage({ subject: `${path}: ${taskIds.join(", ")} done (run ${run.runId})`, runId: run.runId, kind: "records" }),
  });
  if (sandbox && !path.startsWith(".autonomous/")) await sandbox.writeFile(path, next);
}

function toPlanDocument(plan: Omit<Plan, "constraints">): PlanDocument {
  return {
    summary: plan.summary,
    mermaid: plan.mermaid,
    tasks: plan.tasks.map((t) => ({
      id: t.id,
      title: t.title,
      description: t.description,
      dependsOn: t.dependsOn,
      files: t.files,
      ...(t.checks?.length ? { checks: t.checks } : {}),
    })),
    acceptanceCriteria: plan.acceptanceCriteria.map((c) => ({ id: c.id, description: c.description, command: c.command })),
    risks: plan.risks,
  };
}

/** The planner's Plan from a stored PlanDocument (the validator and implementer take the agents' type). */
export async function toAgentPlan(plan: PlanDocument): Promise<Plan> {
  return {
    constraints: await extractConstraints(plan.mermaid),
    summary: plan.summary,
    mermaid: plan.mermaid,
    tasks: plan.tasks.map((t) => ({
      id: t.id,
      title: t.title,
      description: t.description ?? "",
      dependsOn: t.dependsOn ?? [],
      files: t.files ?? [],
      checks: t.checks ?? [],
    })),
    acceptanceCriteria: plan.acceptanceCriteria.map((c, i) => ({ id: c.id ?? `ac${i + 1}`, description: c.description, command: c.command })),
    risks: plan.risks ?? [],
  };
}

export async function recordPlan({
  runId,
  stepKey,
  plan: doc,
  version,
  edited,
  by,
  feedback,
  answered,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  version: number;
  edited?: boolean;
  by?: string;
  feedback?: string | null;
  /** This version answers a person's question on a plan gate: PLAN_QUESTION_ANSWERED is recorded with it. */
  answered?: { gateId: string; question: string; answer: string };
}) {
  const run = await loadRun({ runId });
  const spec = await commitSpec({
    repoPath: run.repoPath,
    branch: run.branch,
    runId,
    title: firstLine(run.request),
    version,
    status: edited ? "edited" : "draft",
    request: run.request,
    mermaid: doc.mermaid,
    tasks: doc.tasks.map((t) => ({ id: t.id, title: t.title, dependsOn: t.dependsOn })),
    summary: doc.summary,
    planHash: planHash(doc),
  });
  await write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
    const result = await appendEventsTx(
      tx,
      runId,
      [
        edited
          ? { type: "PLAN_EDITED", payload: { version, by: by ?? "unknown", plan: doc, path: spec.path, commitSha: spec.sha } }
          : { type: "PLAN_CREATED", payload: { version, plan: doc, path: spec.path, commitSha: spec.sha, feedback: feedback ?? null } },
        ...(answered ? [{ type: "PLAN_QUESTION_ANSWERED" as const, payload: { ...answered, version } }] : []),
      ],
      { stepKey },
    );
    if (!result.duplicate) {
      await tx.insert(artifacts).values({
        id: newId("art"),
        workflowRunId: runId,
        stage: "planning",
        type: "spec",
        path: spec.path,
        commitSha: spec.sha,
        version,
      });
    }
  });
  return { path: spec.path, sha: spec.sha };
}

export function firstLine(text: string): string {
  return singleLine(text.split("\n").find((l) => singleLine(l)) ?? "request").slice(0, 80) || "request";
}

// ---------------------------------------------------------------------------------------------------------------------
// Gates, clarifications, pauses — a run waiting for a person holds no sandbox

/** Before a wait: commit the work in progress and drop the sandbox; returns the tree to check on resume. */
async function parkSandbox(run: RunContext, reason: string, stepKey: string): Promise<string | null> {
  const dir = `${getEnv().dataDir}/workspaces/${runIdDir(run.runId)}`;
  const exists = await import("node:fs/promises").then((fs) => fs.stat(dir).then(() => true).catch(() => false));
  if (!exists) return null;
  const sandbox = await attachSandbox(await sandboxOptions(run));
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
  await releaseSandbox(await sandboxOptions(run));
  return wip.tree;
}

const runIdDir = (runId: string) => runId.replace(/[^A-Za-z0-9_-]/g, "_");

export async function restore({ runId, expectedTree }: { runId: string; expectedTree: string }) {
  const run = await loadRun({ runId });
  const sandbox = await restoreSandbox({ ...(await sandboxOptions(run)), expectedTree });
  return { workspace: sandbox.id };
}

export async function openGate({
  runId,
  stepKey,
  kind,
  context,
}: {
  runId: string;
  stepKey: string;
  kind: GateKind;
  context: Record<string, unknown>;
}): Promise<{ gateId: string; tree: string | null; deadline: DecisionDeadlineInfo | null }> {
  const run = await loadRun({ runId });
  const tree = await parkSandbox(run, `waiting for a ${kind} decision`, stepKey);
  const { gateId, deadline } = await write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
    const earlier = (await findStepEvents(tx, runId, stepKey)).find((e) => e.type === "APPROVAL_REQUESTED");
    if (earlier?.type === "APPROVAL_REQUESTED") return { gateId: earlier.payload.gateId, deadline: earlier.payload.deadline ?? null };
    const [max] = await tx.select({ n: sql<number>`coalesce(max(${gates.gateNumber}), 0)` }).from(gates).where(eq(gates.workflowRunId, runId));
    const gateNumber = (max?.n ?? 0) + 1;
    const id = newId("gate");
    const planVersion = kind === "plan" ? (context.version as number | undefined) : undefined;
    const deadline = deadlineFor({ config: run.config, subject: kind, now: workflowClock.now() });
    await tx.insert(gates).values({
      id,
      workflowRunId: runId,
      gateNumber,
      kind,
      artifactVersion: planVersion ?? null,
      context: redactDeep(context),
    });
    await appendEventsTx(
      tx,
      runId,
      [{ type: "APPROVAL_REQUESTED", payload: { gateId: id, gateNumber, kind, artifactVersion: planVersion ?? null, ...(deadline ? { deadline } : {}) } }],
      { stepKey },
    );
    return { gateId: id, deadline };
  });
  return { gateId, tree, deadline };
}

export { applyPlanEdits, type EditedPlan } from "./plan-edits";

export type WaitResult<T> = { state: "pending" } | { state: "ended"; status: string } | ({ state: "done" } & T);

/**
 * A gate as a waiting workflow reads it: still pending (the run's wait goes on), ended with the run, or decided — and
 * then acknowledged, so the re-announcer stops repeating the decision's announcement (lib/runs/decision-acks.ts).
 */
export async function readDecidedGate({
  runId,
  gateId,
}: {
  runId: string;
  gateId: string;
}): Promise<{ state: "pending" } | { state: "ended"; status: string } | { state: "decided"; gate: typeof gates.$inferSelect }> {
  const db = await getDb();
  const gate = await db.query.gates.findFirst({ where: eq(gates.id, gateId) });
  if (!gate) throw new AppError("not_found:gate", `Gate ${gateId} does not exist.`);
  if (gate.status === "pending") {
    const run = await getRunState({ id: runId });
    if (run && TERMINAL_STATUSES.has(run.status)) return { state: "ended", status: run.status };
    await waitCheckHooks.afterPending?.({ runId, key: decisionKey.gate(gateId) });
    return { state: "pending" };
  }
  if (gate.status === "cancelled") return { state: "ended", status: "cancelled" };
  await acknowledgeDecision({ runId, key: decisionKey.gate(gateId) });
  return { state: "decided", gate };
}

export async function readGate({
  runId,
  gateId,
}: {
  runId: string;
  gateId: string;
}): Promise<WaitResult<{ gateId: string; decision: string; notes: string | null; decidedBy: string | null; editedPlan: EditedPlan | null; /** An escalated question's typed answer, as text. */ answer: string | null; now: number }>> {
  const read = await readDecidedGate({ runId, gateId });
  if (read.state !== "decided") return read;
  const { gate } = read;
  const payload = gate.payload as { editedPlan?: EditedPlan; response?: unknown } | null;
  return {
    state: "done",
    gateId: gate.id,
    decision: gate.decision ?? gate.status,
    notes: gate.notes,
    decidedBy: gate.decidedBy,
    editedPlan: payload?.editedPlan ?? null,
    answer: payload?.response !== undefined && payload?.response !== null ? answerText(payload.response) : null,
    now: workflowClock.now(),
  };
}

/**
 * Ask a person. Up to maxClarifications questions are clarifications; the next escalates to a full approval gate where
 * a person sees the whole context.
 */
export async function ask({
  runId,
  stepKey,
  stage,
  question,
  context,
  options,
  responseType,
}: {
  runId: string;
  stepKey: string;
  stage: Stage;
  question: string;
  context: string | null;
  options: string[];
  responseType: ClarificationResponseType;
}): Promise<
  | { kind: "clarification"; clarificationId: string; tree: string | null; deadline: DecisionDeadlineInfo | null }
  | { kind: "escalation"; gateId: string; tree: string | null; deadline: DecisionDeadlineInfo | null }
> {
  const run = await loadRun({ runId });
  const state = await getRunState({ id: runId });
  if ((state?.clarificationCount ?? 0) >= run.config.maxClarifications) {
    const db = await getDb();
    const earlier = await db
      .select()
      .from(clarificationRequests)
      .where(eq(clarificationRequests.workflowRunId, runId))
      .orderBy(asc(clarificationRequests.createdAt));
    const gate = await openGate({
      runId,
      stepKey,
      kind: "escalation",
      context: {
        question,
        context,
        options,
        // As a clarification stores it: options make a text question a single choice (the gate asks in that form).
        responseType: options.length && responseType === "text" ? "single_choice" : responseType,
        stage,
        reason: `The run already asked ${run.config.maxClarifications} question(s), its limit.`,
        clarifications: earlier.map((c) => ({ question: c.question, response: c.response, status: c.status })),
      },
    });
    return { kind: "escalation", gateId: gate.gateId, tree: gate.tree, deadline: gate.deadline };
  }
  const tree = await parkSandbox(run, "waiting for an answer", stepKey);
  const { clarificationId, deadline } = await write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
    const earlier = (await findStepEvents(tx, runId, stepKey)).find((e) => e.type === "CLARIFICATION_REQUESTED");
    if (earlier?.type === "CLARIFICATION_REQUESTED") return { clarificationId: earlier.payload.clarificationId, deadline: earlier.payload.deadline ?? null };
    const id = newId("clr");
    const deadline = deadlineFor({ config: run.config, subject: "clarification", now: workflowClock.now() });
    await tx.insert(clarificationRequests).values({
      id,
      workflowRunId: runId,
      stage,
      question: redact(question),
      context: context ? redact(context) : null,
      options: options.length ? options : null,
      responseType: options.length && responseType === "text" ? "single_choice" : responseType,
      attemptNumber: (current?.clarificationCount ?? 0) + 1,
    });
    await appendEventsTx(
      tx,
      runId,
      [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId: id, stage, question: redact(question), ...(deadline ? { deadline } : {}) } }],
      { stepKey },
    );
    return { clarificationId: id, deadline };
  });
  return { kind: "clarification", clarificationId, tree, deadline };
}

/** What the asking stage reads when a person skipped its question. */
export const SKIPPED_ANSWER =
  "The person chose not to answer. Proceed with your best judgement, and state the assumption you made in your summary (or in the plan's risks).";

export async function readClarification({
  runId,
  clarificationId,
}: {
  runId: string;
  clarificationId: string;
}): Promise<WaitResult<{ answer: string; now: number }>> {
  const db = await getDb();
  const row = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, clarificationId) });
  if (!row) throw new AppError("not_found:clarification", `Clarification ${clarificationId} does not exist.`);
  if (row.status === "pending") {
    const run = await getRunState({ id: runId });
    if (run && TERMINAL_STATUSES.has(run.status)) return { state: "ended", status: run.status };
    await waitCheckHooks.afterPending?.({ runId, key: decisionKey.clarification(clarificationId) });
    return { state: "pending" };
  }
  await acknowledgeDecision({ runId, key: decisionKey.clarification(clarificationId) });
  if (row.status === "ignored") return { state: "done", answer: SKIPPED_ANSWER, now: workflowClock.now() };
  if (row.status !== "answered") return { state: "ended", status: "cancelled" };
  return { state: "done", answer: answerText(row.response), now: workflowClock.now() };
}

function answerText(response: unknown): string {
  if (typeof response === "string") return response;
  if (Array.isArray(response)) return response.join(", ");
  if (response && typeof response === "object" && "fileName" in response) {
    const file = response as { fileName: string; contentBase64: string };
    const text = Buffer.from(file.contentBase64, "base64").toString("utf8");
    return `File ${file.fileName}:\n${text.slice(0, 20_000)}`;
  }
  return JSON.stringify(response);
}

export async function pause({
  runId,
  stepKey,
  reason,
  message,
  stage,
  plan: draft,
}: {
  runId: string;
  stepKey: string;
  /** invalid_plan: the plan with its invalid diagram, shown in the editor so a person can fix it by hand. */
  plan?: PlanDocument | null;
  reason: "model_outage" | "model_auth" | "timeout" | "invalid_plan" | "merge_conflict" | "sandbox" | "secret_detected" | "by_person" | "other";
  message: string;
  stage: Stage | null;
}): Promise<{ tree: string | null }> {
  const run = await loadRun({ runId });
  const tree = await parkSandbox(run, `paused: ${reason}`, stepKey);
  await append(runId, stepKey, [{ type: "RUN_PAUSED", payload: { reason, message: redact(message), stage, ...(draft ? { plan: draft } : {}) } }]);
  return { tree };
}

/**
 * A pause a person asked for that no implementation turn has honoured yet (it came during validation, or during the
 * implementation's last turn): the workflow honours it at the next stage boundary, with the message to show.
 */
export async function pauseRequested({ runId }: { runId: string }): Promise<{ message: string } | null> {
  const request = await pendingPauseRequest({ runId });
  if (!request) return null;
  return { message: `Paused by a person${request.note ? `: ${redact(request.note)}` : ""}. Resume it to continue where it stopped.` };
}

export async function readResume({
  runId,
}: {
  runId: string;
}): Promise<WaitResult<{ action: "retry" | "extend"; editedPlan: PlanDocument | null; by: string | null; now: number }>> {
  const run = await getRunState({ id: runId });
  if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  if (TERMINAL_STATUSES.has(run.status)) return { state: "ended", status: run.status };
  if (run.status === "paused") {
    await waitCheckHooks.afterPending?.({ runId, key: "resume" });
    return { state: "pending" };
  }
  const events = await listEvents({ runId, after: Math.max(0, run.lastSequence - 50) });
  const resumed = [...events].reverse().find((e) => e.type === "RUN_RESUMED");
  if (resumed) await acknowledgeDecision({ runId, key: decisionKey.resume(resumed.sequence) });
  const action = resumed?.type === "RUN_RESUMED" ? (resumed.payload.action ?? "retry") : "retry";
  const editedPlan = resumed?.type === "RUN_RESUMED" ? (resumed.payload.editedPlan ?? null) : null;
  const by = resumed?.type === "RUN_RESUMED" ? resumed.payload.by : null;
  return { state: "done", action, editedPlan, by, now: workflowClock.now() };
}

// ---------------------------------------------------------------------------------------------------------------------
// Implementation

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
  const events = await listEvents({ runId, limit: 100_000 });
  if (events.some((e) => e.type === "STAGE_STARTED" && (e.payload as { stage?: string }).stage === "implementation")) return { skip: [] };
  const threshold = run.config.triage?.threshold ?? 0.8;
  const candidates = doc.tasks.filter((t) => (t.checks ?? []).length || (t.files ?? []).length);
  if (!candidates.length) return { skip: [] };
  const sandbox = await attachSandbox(await sandboxOptions(run));
  const results: TriageResult[] = [];
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
  const verdicts: NewRunEvent[] = results
    .filter((r) => r.confidence > 0)
    .map((r) => ({ type: "TASK_TRIAGED", payload: { taskId: r.taskId, confidence: r.confidence, evidence: r.evidence, skipped: r.skipped } }));
  if (verdicts.length) await append(runId, "triage", verdicts);
  return { skip: skipped.map((r) => ({ id: r.taskId, evidence: r.evidence })) };
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

/** The implementer's starting state: the approved plan, the request, the fix feedback and the project memory. */
export async function beginImplementation({
  runId,
  plan: doc,
  request,
  feedback,
  maxIterations,
  skip,
}: {
  runId: string;
  plan: PlanDocument;
  request: string;
  feedback: string | null;
  maxIterations: number;
  /** Tasks triage found already done: not the implementer's to do. */
  skip?: Array<{ id: string; evidence: string[] }>;
}): Promise<ImplementerState> {
  const run = await loadRun({ runId });
  const memory = await readLatestMemory({ repoPath: run.repoPath, ref: run.branch });
  return startImplementer({ plan: await toAgentPlan(doc), request, memory: memory.raw ?? undefined, feedback: feedback ?? undefined, maxIterations, skip });
}

export function applyAnswer(state: ImplementerState, answer: string): ImplementerState {
  return answerImplementerClarification(state, answer);
}

/** A person's decision on a policy gate, told to the implementer (pure: the workflow calls it outside any step). */
export function applyPolicy(state: ImplementerState, action: PolicyAction, decision: { decision: string; decidedBy?: string | null; notes?: string | null }) {
  return applyPolicyDecision(state, action, { approved: decision.decision === "approve", by: decision.decidedBy ?? null, notes: decision.notes ?? null });
}

/** The plan gate's decision on the implementer's re-plan, told to it (pure: the workflow calls it outside any step). */
export async function applyReplan(
  state: ImplementerState,
  decision: { approved: boolean; plan: PlanDocument | null; notes: string | null },
): Promise<ImplementerState> {
  return applyReplanDecision(state, { approved: decision.approved, plan: decision.plan ? await toAgentPlan(decision.plan) : null, notes: decision.notes });
}

// ---------------------------------------------------------------------------------------------------------------------
// Per-task verification and the debug step (seed 003)

/** How long one task check may run: a quick check, and never past the step's own budget. */
const VERIFY_CHECK_MS = 120_000;
/** How much of a failed check's output is kept (its end: where a log says what failed). */
const VERIFY_OUTPUT_CHARS = 4_000;

export type VerifyStepResult = { verified: string[]; failed: (VerifyFailure & { attempt: number }) | null; now: number };

/**
 * Run the own acceptance commands (`checks`) of tasks just finished, in order, stopping at the first failure: each task
 * that passes is TASK_VERIFIED, the failing one TASK_VERIFY_FAILED with its output's tail (redacted). `attempts` is the
 * failing task's debug attempt so far (recorded with the failure). What the checks leave in the workspace stays: the
 * next checkpoint may hold it, as it would after the implementer ran the same command.
 */
export async function verifyTasks({
  runId,
  stepKey,
  plan: doc,
  taskIds,
  attempts,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  taskIds: string[];
  /** Debug attempts per task so far (the workflow's count). */
  attempts: Record<string, number>;
}): Promise<VerifyStepResult> {
  const tasks = taskIds.map((id) => doc.tasks.find((t) => t.id === id)).filter((t) => t && (t.checks ?? []).length) as PlanDocument["tasks"];
  if (!tasks.length) return { verified: [], failed: null, now: workflowClock.now() };
  const run = await loadRun({ runId });
  const sandbox = await attachSandbox(await sandboxOptions(run));
  const started = Date.now();
  const events: NewRunEvent[] = [];
  const verified: string[] = [];
  let failed: VerifyStepResult["failed"] = null;
  for (const task of tasks) {
    for (const command of task.checks ?? []) {
      const left = Math.max(1_000, started + stepBudget.ms() - Date.now());
      const r = await sandbox.exec("sh", ["-c", command], { timeoutMs: Math.min(VERIFY_CHECK_MS, left) });
      if (r.exitCode === 0 && !r.timedOut) continue;
      const output = outputTail(`${r.stdout}\n${r.stderr}`.trim(), VERIFY_OUTPUT_CHARS);
      failed = { taskId: task.id, command: redact(command), exitCode: r.timedOut ? null : r.exitCode, output, attempt: (attempts[task.id] ?? 0) + 1 };
      break;
    }
    if (failed) {
      events.push({ type: "TASK_VERIFY_FAILED", payload: failed });
      break;
    }
    verified.push(task.id);
    events.push({ type: "TASK_VERIFIED", payload: { taskId: task.id, commands: (task.checks ?? []).map((c) => redact(c)) } });
  }
  if (events.length) await append(runId, stepKey, events);
  return { verified, failed, now: workflowClock.now() };
}

export type DebugStepResult =
  | WithNow<{ kind: "verdict"; verdict: DebugVerdict; exhausted: boolean }>
  | WithNow<{ kind: "model_error"; reason: string; message: string }>;

/**
 * The debug step: the implementer's model classifies a failed verification (lib/agents/debugger.ts) and says whether
 * to fix, ask or escalate; past `maxDebugAttempts` for the task it escalates to a person whatever the verdict
 * (bounded). DEBUG_CLASSIFIED records both. A model outage is returned for the workflow to pause on, as a turn's is.
 */
export async function debugTask({
  runId,
  stepKey,
  plan: doc,
  failure,
  attempt,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  failure: VerifyFailure;
  attempt: number;
}): Promise<DebugStepResult> {
  const run = await loadRun({ runId });
  const task = doc.tasks.find((t) => t.id === failure.taskId) ?? { id: failure.taskId, title: failure.taskId };
  let verdict: DebugVerdict;
  try {
    verdict = await runDebugger({
      failure,
      task: { id: task.id, title: task.title, description: task.description },
      attempt,
      request: run.request,
      modelId: run.config.modelRouting.implementer,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
    });
  } catch (error) {
    if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
    throw error;
  }
  const exhausted = attempt > (run.config.verification?.maxDebugAttempts ?? 2);
  const action = exhausted ? "escalate" : verdict.action;
  await append(runId, stepKey, [
    {
      type: "DEBUG_CLASSIFIED",
      payload: { taskId: failure.taskId, category: verdict.category, action, reason: verdict.reason, attempt, parsed: verdict.parsed, ...(exhausted ? { exhausted } : {}) },
    },
  ]);
  return { kind: "verdict", verdict: { ...verdict, action, question: action === "ask" ? verdict.question : null }, exhausted, now: workflowClock.now() };
}

/** The failed task opened again for a fix pass, with the failure in context (pure: called outside any step). */
export function applyVerifyFailure(
  state: ImplementerState,
  input: { failure: VerifyFailure; verdict: DebugVerdict | null; answer?: string | null; note?: string | null },
): ImplementerState {
  return reopenTask(state, input);
}

/** The plan gate's decision on a re-plan the debug step escalated, told to the implementer (pure). */
export async function applyDebugReplanDecision(
  state: ImplementerState,
  decision: { approved: boolean; plan: PlanDocument | null; notes: string | null },
): Promise<ImplementerState> {
  return applyDebugReplan(state, { approved: decision.approved, plan: decision.plan ? await toAgentPlan(decision.plan) : null, notes: decision.notes });
}

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

/** The durable sleep between two looks at a command left running detached. */
export const COMMAND_POLL_INTERVAL = "1s";

export type TurnStepResult =
  | WithNow<ImplementerTurnResult>
  /** The model call did not answer within the step's budget: the turn runs again in a fresh step (not a model error). */
  | WithNow<{ kind: "step_budget"; state: ImplementerState }>
  | WithNow<{ kind: "model_error"; reason: string; message: string }>
  | WithNow<{ kind: "secret_detected"; state: ImplementerState; files: string[]; message: string }>
  | WithNow<{ kind: "pause_requested"; by: string; message: string }>;

/**
 * Files whose added lines hold a secret (a configured one, a fragment or an encoding of one, or a key shape), from the
 * workspace's diff, as paths in the worktree (redact them before showing them). The file tools refuse such content,
 * but a command can still write it (e.g. copy a key file).
 */
async function secretsInChanges(sandbox: Parameters<typeof scanChangesForSecrets>[0]): Promise<string[]> {
  // A file too large to check counts as holding one (lib/runs/secret-scan.ts).
  return withheldPaths(await scanChangesForSecrets(sandbox));
}

/**
 * The path of a diff's `+++ b/<path>` line. Git C-quotes a name with a tab, newline, quote or backslash in it (even with
 * core.quotePath off), and a file the sandbox named that way must still be found.
 */
export function diffPath(name: string): string {
  if (!name.startsWith('"')) return name.replace(/^b\//, "");
  const bytes: number[] = [];
  const escapes: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, "\\": 92 };
  for (let i = 1; i < name.length && name[i] !== '"'; i++) {
    if (name[i] !== "\\") {
      bytes.push(...Buffer.from(name[i]!, "utf8"));
    } else if (/[0-7]/.test(name[i + 1] ?? "")) {
      bytes.push(parseInt(name.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(escapes[name[i + 1]!] ?? name.charCodeAt(i + 1));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8").replace(/^b\//, "");
}

/**
 * Put files back as the last checkpoint has them (delete those it lacks), through the sandbox: how a command's changes
 * that the policy refuses are undone, in any sandbox.
 */
async function restoreFromCheckpoint(sandbox: Awaited<ReturnType<typeof attachSandbox>>, paths: string[]) {
  if (!paths.length || !sandbox.workspacePath || !sandbox.location) return;
  const sha = await lastCheckpoint(sandbox);
  for (const p of paths) {
    const kept = await git(sandbox.workspacePath, ["show", `${sha}:${p}`], { worktree: sandbox.location, allowFailure: true });
    if (kept.code === 0) await sandbox.writeFile(p, kept.stdout);
    else await sandbox.exec("rm", ["-f", "--", p]);
  }
}

export async function implementTurn({
  runId,
  stepKey,
  state,
  plan: doc,
  attempt,
  deadline,
}: {
  runId: string;
  stepKey: string;
  state: ImplementerState;
  plan: PlanDocument;
  attempt: number;
  /** The implementation stage's deadline (epoch ms): the turn's model call and commands are aborted when it passes. */
  deadline?: number;
}): Promise<TurnStepResult> {
  const stepStartedAt = Date.now();
  // A person asked for a pause: this turn does not start; the workflow parks the run (work committed, sandbox freed).
  const pauseRequest = await pendingPauseRequest({ runId });
  if (pauseRequest) {
    const message = `Paused by a person${pauseRequest.note ? `: ${redact(pauseRequest.note)}` : ""}. Resume it to continue where it stopped.`;
    return { kind: "pause_requested", by: pauseRequest.by, message, now: workflowClock.now() };
  }
  const run = await loadRun({ runId });
  const sandbox = await attachSandbox(await sandboxOptions(run));
  // A cancellation stops the turn where it is: the model call and any command it runs are aborted within a poll.
  const cancelled = watchForEnd(runId);
  // The stage deadline cuts a hung model call or command where it is, instead of after it returns.
  const overtime = new AbortController();
  // Polled against workflowClock (not a one-shot timer), so the deadline is the same clock the workflow's checks use.
  const deadlineTimer =
    deadline === undefined ? null : setInterval(() => workflowClock.now() > deadline && overtime.abort(new Error("stage deadline")), END_POLL_MS);
  let result;
  // The step's state carries a reference to the conversation (lib/runs/conversation.ts); the turn sees all of it.
  const loaded = await loadConversation(state);
  // Real time, not workflowClock: the host cuts the call by the wall clock.
  const stepEndsAt = stepStartedAt + stepBudget.ms();
  let prompt: PromptInfo | null = null;
  const contextConfig = run.config.context;
  try {
    result = await implementerTurn({
      contextBudget: {
        window: contextWindowOf(run.config.modelRouting.implementer, contextConfig?.window),
        summariseAt: contextConfig?.summariseAt ?? 0.7,
        keepToolResults: contextConfig?.keepToolResults ?? 6,
      },
      onPrompt: (info) => {
        prompt = info;
      },
      stepEndsAt,
      now: Date.now,
      state: loaded,
      sandbox,
      modelId: run.config.modelRouting.implementer,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
      signal: AbortSignal.any([cancelled.signal, overtime.signal]),
      policy: run.config.policy,
      scope: [...new Set(doc.tasks.flatMap((t) => t.files ?? []))],
      restore: (paths) => restoreFromCheckpoint(sandbox, paths),
    });
  } catch (error) {
    if (error instanceof StepBudgetExceededError && !overtime.signal.aborted && !cancelled.signal.aborted) {
      // The model had not answered when the step's time ran out: nothing of the turn happened (no tool ran), so it is
      // simply redone in a fresh step, with a fresh budget.
      cancelled.stop();
      return { kind: "step_budget", state, now: workflowClock.now() };
    }
    if (overtime.signal.aborted && !cancelled.signal.aborted) {
      // Over the deadline: the turn is dropped (its state unchanged, so it runs again after an extension); the
      // workflow sees `now` past the deadline and pauses the run for a person (extend or cancel).
      cancelled.stop();
      return { kind: "continue", state, now: Math.max(workflowClock.now(), deadline ?? 0) + 1 };
    }
    if (!cancelled.signal.aborted) {
      cancelled.stop();
      if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
      throw error;
    }
  } finally {
    cancelled.stop();
    if (deadlineTimer) clearInterval(deadlineTimer);
  }
  // Cancelled while the turn ran: nothing of it is committed, and the sandbox goes (the tools may even have recreated
  // files in a worktree the cancellation already removed).
  const ended = cancelled.signal.aborted ? "cancelled" : await endedStatus(runId);
  if (ended || !result) {
    await sandbox.destroy().catch(() => null);
    await releaseSandbox(await sandboxOptions(run)).catch(() => null);
    throw new RunEndedError((await endedStatus(runId)) ?? ended ?? "cancelled");
  }
  const events: NewRunEvent[] = [];
  const sent = prompt as PromptInfo | null;
  if (sent?.summarised && !state.contextSummarised) {
    // The first summarised prompt of this session is the run's record; later turns stay summarised silently.
    events.push({ type: "CONTEXT_SUMMARISED", payload: { ...sent.summarised, tokens: sent.tokens, budget: sent.budget } });
    result = { ...result, state: { ...result.state, contextSummarised: true } };
  }
  // Refusals under the policy (deny list, file caps) are the run's record too, not only the model's.
  for (const refusal of (result.state.refusals ?? []).slice(state.refusals?.length ?? 0)) {
    events.push({ type: "POLICY_REFUSED", payload: refusal });
  }
  for (const r of (result.state.reflections ?? []).slice(state.reflections?.length ?? 0)) {
    events.push({ type: "TASK_PROGRESS", payload: r });
  }
  const before = new Map(state.todos.map((t) => [t.id, t.status]));
  const total = result.state.todos.length;
  const commits = result.state.todos.some((t) => t.status === "done" && before.get(t.id) !== "done") || result.kind === "done";
  // Nothing holding a secret is committed: the changes since the last checkpoint are dropped, the run pauses with a
  // "secret detected" reason, and after a retry the turn is redone with a note telling the model why.
  const leaks = commits ? describeLeaks(await scanChangesForSecrets(sandbox)).map((f) => redact(f)) : [];
  if (leaks.length) {
    await rollbackToCheckpoint({ sandbox });
    const message = `Secret detected in ${leaks.join(", ")}: the changes since the last checkpoint were not committed. Retry to let the implementer redo them without the secret.`;
    const redo: ImplementerState = {
      ...state,
      messages: [
        ...state.messages,
        { role: "user", content: `${message} Never write credentials into files; read them from environment variables at run time.` },
      ],
    };
    return { kind: "secret_detected", state: redo, files: leaks, message, now: workflowClock.now() };
  }
  const earlier = commits ? await checkpointsOfUnrecordedRun(runId, stepKey, sandbox.location) : new Map<string, string>();
  const finished: string[] = [];
  for (const [index, todo] of result.state.todos.entries()) {
    const was = before.get(todo.id);
    if (todo.status === "in_progress" && was !== "in_progress") {
      events.push({ type: "TASK_STARTED", payload: { taskId: todo.id, index: index + 1, total } });
    }
    if (todo.status === "done" && was !== "done") {
      const checkpoint = earlier.has(todo.id)
        ? { sha: earlier.get(todo.id)! }
        : await commitCheckpoint({ sandbox, runId, taskId: todo.id, title: todo.title });
      events.push({ type: "TASK_COMPLETED", payload: { taskId: todo.id, commitSha: checkpoint.sha } });
      finished.push(todo.id);
    }
  }
  // A run from a tasks.md keeps its checkboxes: each finished task is checked and committed after its checkpoint.
  await checkTasksFile(run, doc, finished, sandbox);
  if (result.kind === "done") {
    const final = earlier.has("final")
      ? { sha: earlier.get("final")! }
      : await commitCheckpoint({ sandbox, runId, taskId: "final", title: "implementation complete" });
    events.push({ type: "IMPLEMENTATION_SUCCEEDED", payload: { attempt, commitSha: final.sha } });
  }
  if (result.kind === "failure") {
    // A command the turn left running has no one left to collect it.
    if (result.state.pendingCommand) await sandbox.killDetached?.(result.state.pendingCommand.id).catch(() => null);
    await rollbackToCheckpoint({ sandbox }).catch(() => null);
    events.push({ type: "IMPLEMENTATION_FAILED", payload: { attempt, reason: redact(result.message) } });
  }
  if (events.length) await append(runId, stepKey, events);
  const now = workflowClock.now();
  result = { ...result, state: await storeConversation({ runId, base: state, loaded, next: result.state }) };
  // What the model said is stored as the step's result: redact it like everything else that is kept.
  if (result.kind === "failure") return { ...result, message: redact(result.message), now };
  if (result.kind === "done") return { ...result, summary: redact(result.summary), now };
  if (result.kind === "policy") return { ...result, action: redactDeep(result.action), now };
  if (result.kind === "replan") return { ...result, observation: redact(result.observation), proposal: redact(result.proposal), now };
  return { ...result, now };
}

export type CommandPollResult = WithNow<{ kind: "running" }> | WithNow<Extract<ImplementerTurnResult, { kind: "continue" | "policy" }>>;

/**
 * One look at the command a turn left running detached (state.pendingCommand), waiting for it at most the step's
 * budget. Once it has ended, its result joins the conversation exactly as an inline run's would (collectCommand), and
 * the state goes on without a pending command. Idempotent: a re-run step (after a crash) reads the same ended command
 * from the sandbox's files and appends the same result once, since the step's input state is the memoized one.
 */
export async function pollCommand({
  runId,
  stepKey,
  state,
  plan: doc,
  deadline,
}: {
  runId: string;
  stepKey: string;
  state: ImplementerState;
  plan: PlanDocument;
  /** The implementation stage's deadline (epoch ms): past it the command is killed, as an inline one would be. */
  deadline?: number;
}): Promise<CommandPollResult> {
  const started = Date.now();
  const pending = state.pendingCommand;
  if (!pending) return { kind: "continue", state, now: workflowClock.now() };
  const run = await loadRun({ runId });
  const sandbox = await attachSandbox(await sandboxOptions(run));
  if (!sandbox.detachedStatus || !sandbox.killDetached) {
    throw new AppError("internal:sandbox", "The run's sandbox cannot look up a command left running detached.");
  }
  const cancelled = watchForEnd(runId);
  let status;
  try {
    // Past the stage deadline the command is killed (it then reads as timed out), as an inline one would be.
    if (deadline !== undefined && workflowClock.now() > deadline) await sandbox.killDetached(pending.id);
    status = await waitDetached({ sandbox: { detachedStatus: sandbox.detachedStatus, killDetached: sandbox.killDetached }, id: pending.id, until: started + stepBudget.ms(), signal: cancelled.signal });
  } catch (error) {
    // A cancel kills the command (waitDetached) and ends the step.
    if (cancelled.signal.aborted) throw new RunEndedError((await endedStatus(runId)) ?? "cancelled");
    throw error;
  } finally {
    cancelled.stop();
  }
  if (status.state === "running") return { kind: "running", now: workflowClock.now() };
  const collected = await collectCommand({
    state,
    sandbox,
    result: status.result,
    policy: run.config.policy,
    scope: [...new Set(doc.tasks.flatMap((t) => t.files ?? []))],
    restore: (paths) => restoreFromCheckpoint(sandbox, paths),
  });
  const refusals = (collected.state.refusals ?? []).slice(state.refusals?.length ?? 0);
  if (refusals.length) await append(runId, stepKey, refusals.map((payload) => ({ type: "POLICY_REFUSED", payload })));
  const now = workflowClock.now();
  if (collected.hold) return { kind: "policy", state: collected.state, action: redactDeep(collected.hold), now };
  return { kind: "continue", state: collected.state, now };
}

/**
 * Task checkpoints that an earlier execution of this step committed before it crashed, taskId → sha ("final" for the
 * closing one), so that a re-run step reuses them instead of committing each task a second time: the ones its stored
 * events name (the crash came after they were written), and the checkpoint commits on the worktree's HEAD after the
 * newest commit any other event names (the crash came between the commit and the events).
 */
async function checkpointsOfUnrecordedRun(runId: string, stepKey: string, worktree: WorktreeLocation): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let known: string | null = null;
  for (const e of await listEvents({ runId, limit: 100_000 })) {
    const p = e.payload as { commitSha?: string | null; baseSha?: string | null; taskId?: string; stepKey?: string };
    if (p.stepKey === stepKey) {
      if (e.type === "TASK_COMPLETED" && p.commitSha && p.taskId) found.set(p.taskId, p.commitSha);
      if (e.type === "IMPLEMENTATION_SUCCEEDED" && p.commitSha) found.set("final", p.commitSha);
    } else if (e.type === "BRANCH_CREATED" && p.baseSha) known = p.baseSha;
    else if (["TASK_COMPLETED", "IMPLEMENTATION_SUCCEEDED", "PLAN_CREATED", "PLAN_EDITED"].includes(e.type) && p.commitSha) known = p.commitSha;
  }
  if (found.size > 0 || !known) return found;
  const format = "%H%x1f%(trailers:key=Gatehouse-Kind,valueonly,separator=)%x1f%(trailers:key=Gatehouse-Task,valueonly,separator=)";
  const out = await git(worktree.workTree, ["log", `--format=${format}`, `${known}..HEAD`], { allowFailure: true, worktree });
  for (const line of out.stdout.split("\n")) {
    const [sha, kind, task] = line.split("\x1f").map((v) => v?.trim());
    if (sha && kind === "checkpoint" && task && !found.has(task)) found.set(task, sha);
  }
  return found;
}

export async function diffSummary({ runId }: { runId: string }) {
  const run = await loadRun({ runId });
  const state = await getRunState({ id: runId });
  const base = await baseShaOf(runId);
  const stat = await git(run.repoPath, ["diff", ...DIFF_SAFE, "--stat", `${base ?? run.config.git.baseBranch}...${run.branch}`, "--", ".", ":(exclude).autonomous"], {
    allowFailure: true,
  });
  return { diffStat: stat.stdout.trim(), status: state?.status ?? null };
}

async function baseShaOf(runId: string): Promise<string | null> {
  const events = await listEvents({ runId, limit: 50 });
  const created = events.find((e) => e.type === "BRANCH_CREATED");
  return created?.type === "BRANCH_CREATED" ? (created.payload.baseSha ?? null) : null;
}

// ---------------------------------------------------------------------------------------------------------------------
// Validation

export type ValidateStepResult =
  | { kind: "result"; passed: boolean; score: number; feedback: string; report: string; findings: unknown[]; now: number }
  | { kind: "model_error"; reason: string; message: string; now: number }
  | { kind: "timeout"; now: number }
  /** An acceptance command outlived the step: it runs on detached; after a durable sleep the next step continues. */
  | { kind: "checks_running"; progress: ValidationProgress; now: number }
  /** A validator model call had not answered when the step's time ran out: made again in a fresh step (checks kept). */
  | { kind: "step_budget"; progress: ValidationProgress; now: number };

/** Task ids in the order the latest implementation attempt finished them. */
/** What people approved changing at the run's policy gates (the actions' paths): validation counts it as in scope. */
async function approvedPolicyPaths(runId: string): Promise<string[]> {
  const db = await getDb();
  const rows = await db
    .select({ context: gates.context })
    .from(gates)
    .where(and(eq(gates.workflowRunId, runId), eq(gates.kind, "policy"), eq(gates.status, "approved")));
  return rows.flatMap((r) => {
    const paths = (r.context as { action?: { paths?: unknown } } | null)?.action?.paths;
    return Array.isArray(paths) ? paths.filter((p): p is string => typeof p === "string") : [];
  });
}

async function completedTaskOrder(runId: string): Promise<string[]> {
  const events = await listEvents({ runId, limit: 100_000 });
  const start = events.findLastIndex((e) => e.type === "STAGE_STARTED" && (e.payload as { stage?: string }).stage === "implementation");
  // Tasks triage skipped were done before any other.
  const triaged = events.filter((e) => e.type === "TASK_TRIAGED" && (e.payload as { skipped?: boolean }).skipped).map((e) => (e.payload as { taskId: string }).taskId);
  return [
    ...triaged,
    ...events
      .slice(start + 1)
      .filter((e) => e.type === "TASK_COMPLETED")
      .map((e) => (e.payload as { taskId: string }).taskId),
  ];
}

/** The approved plan's hash and the hash of the plan being validated (they differ only if the plan changed unapproved). */
async function frozenPlanCheck({ runId, plan }: { runId: string; plan: PlanDocument }): Promise<{ approved: string; validated: string } | undefined> {
  const approved = approvedPlanHash(await listEvents({ runId, limit: 100_000 }));
  return approved ? { approved, validated: planHash(plan) } : undefined;
}

export async function validate({
  runId,
  stepKey,
  plan: doc,
  attempt,
  deadline,
  progress,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  attempt: number;
  /** The validation stage's deadline (epoch ms): commands get at most the time left; past it the step reports a timeout. */
  deadline?: number;
  /** Where the previous step of this validation stopped (its `checks_running` or `step_budget` result). */
  progress?: ValidationProgress | null;
}): Promise<ValidateStepResult> {
  const left = deadline === undefined ? undefined : deadline - workflowClock.now();
  const run = await loadRun({ runId });
  const base = await baseShaOf(runId);
  const sandbox = await attachSandbox({ ...(await sandboxOptions(run)), diffBase: base ?? undefined });
  if (left !== undefined && left <= 0) {
    // Past the deadline, a check still running detached is killed, as an inline one would be.
    if (progress?.pending) await sandbox.killDetached?.(progress.pending.id).catch(() => null);
    return { kind: "timeout", now: workflowClock.now() };
  }
  const stage = stageSignal(runId, deadline);
  // Real time, not workflowClock: the host cuts the step by the wall clock.
  const stepEndsAt = Date.now() + stepBudget.ms();
  let result;
  try {
    const step = await runValidateStep({
      plan: await toAgentPlan(doc),
      request: run.request,
      sandbox,
      attempt,
      threshold: run.config.validation.scoreThreshold,
      commandTimeoutMs: left === undefined ? undefined : Math.max(1_000, Math.min(left, 10 * 60_000)),
      modelId: run.config.modelRouting.validator,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
      completedOrder: await completedTaskOrder(runId),
      approvedPaths: await approvedPolicyPaths(runId),
      frozen: await frozenPlanCheck({ runId, plan: doc }),
      signal: stage.signal,
      stepEndsAt,
      progress: progress ?? undefined,
    });
    if (step.kind === "checks_running") return { kind: "checks_running", progress: step.progress, now: workflowClock.now() };
    result = step.result;
  } catch (error) {
    if (stage.cancelled()) throw new RunEndedError((await endedStatus(runId)) ?? "cancelled");
    if (stage.overtime()) return { kind: "timeout", now: Math.max(workflowClock.now(), deadline ?? 0) + 1 };
    if (error instanceof StepBudgetExceededError) return { kind: "step_budget", progress: error.resume as ValidationProgress, now: workflowClock.now() };
    if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
    throw error;
  } finally {
    stage.stop();
  }
  if (deadline !== undefined && workflowClock.now() > deadline) return { kind: "timeout", now: workflowClock.now() };
  const report = redact(result.report);
  await append(runId, stepKey, [
    result.passed
      ? { type: "VALIDATION_PASSED", payload: { attempt, score: result.alignmentScore, report } }
      : { type: "VALIDATION_FAILED", payload: { attempt, score: result.alignmentScore, summary: redact(result.feedback).slice(0, 2000), report } },
  ]);
  return {
    kind: "result",
    passed: result.passed,
    score: result.alignmentScore,
    feedback: redact(result.feedback),
    report,
    findings: redactDeep(result.findings),
    now: workflowClock.now(),
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Delivery and the end of a run

/**
 * Commit the run's records on its branch. `completing`: these are the records a squash merge carries into the base
 * branch before the run's last step appends RUN_COMPLETED, so they already say what the run is when it lands there.
 */
export async function writeRecords(run: RunContext, validationReport: string | null, { completing = false }: { completing?: boolean } = {}) {
  const events = await listEvents({ runId: run.runId, limit: 100_000 });
  const db = await getDb();
  const rows = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.runId));
  const built = buildRunContext({
    events,
    clarifications: rows.map((r) => clarificationFromRow(r)),
    baseBranch: run.config.git.baseBranch,
  });
  const context = completing ? { ...built, status: "completed", completedAt: built.completedAt ?? workflowClock.now() } : built;
  return commitRunRecords({ repoPath: run.repoPath, branch: run.branch, context, validationReport, events });
}

export async function lastValidationReport(runId: string): Promise<string | null> {
  const events = await listEvents({ runId, limit: 100_000 });
  const last = [...events].reverse().find((e) => e.type === "VALIDATION_PASSED" || e.type === "VALIDATION_FAILED");
  if (last?.type === "VALIDATION_PASSED" || last?.type === "VALIDATION_FAILED") return last.payload.report ?? null;
  return null;
}

/** Commit the run's records and memory on its branch, then squash-merge when the config allows. */
export async function deliver({ runId, stepKey, merge }: { runId: string; stepKey: string; merge: boolean }) {
  const run = await loadRun({ runId });
  await releaseSandbox(await sandboxOptions(run));
  const report = await lastValidationReport(runId);
  await writeRecords(run, report, { completing: merge });
  const state = await getRunState({ id: runId });
  await updateMemory({
    repoPath: run.repoPath,
    branch: run.branch,
    runId,
    title: firstLine(run.request),
    outcome: `Delivered on ${run.branch}${state?.lastValidation === "passed" ? " (validation passed)" : " (accepted without passing validation)"}`,
    decisions: await decisionsOf(runId),
  });
  if (!merge) return { merge: "skipped" as const, files: [] as string[] };
  // Only work that passed validation is merged automatically; "accept anyway" delivers the branch, never a merge.
  if (state?.lastValidation !== "passed") return { merge: "skipped" as const, files: [] as string[] };
  const result = await squashMerge({
    repoPath: run.repoPath,
    branch: run.branch,
    baseBranch: run.config.git.baseBranch,
    runId,
    title: firstLine(run.request),
  });
  if (result.status === "conflict") return { merge: "conflict" as const, files: result.files, reason: result.reason };
  await append(runId, stepKey, [{ type: "PR_MERGED", payload: { number: null, sha: result.sha, method: "squash" } }]);
  return { merge: result.status, files: [] as string[] };
}

/**
 * Carry out a person's merge decision (MERGE_DECIDED, see decideMerge): squash-merge the run branch into its base
 * (local) or merge its pull request (GitHub), recording PR_MERGED with who decided, or MERGE_FAILED with the reason
 * and the conflicting files. Idempotent: a decision already carried out (or a run merged meanwhile) does nothing again.
 */
export async function mergeByDecision({ runId }: { runId: string }) {
  const events = await listEvents({ runId, limit: 100_000 });
  const decision = [...events].reverse().find((e) => e.type === "MERGE_DECIDED" || e.type === "MERGE_FAILED" || e.type === "PR_MERGED");
  if (decision?.type !== "MERGE_DECIDED") return { outcome: "nothing to do" as const };
  const by = decision.payload.by;
  const stepKey = `merge-decision:${decision.sequence}`;
  const run = await loadRun({ runId });
  const failed = async (reason: string, files: string[] = []) => {
    await append(runId, `${stepKey}:failed`, [{ type: "MERGE_FAILED", payload: { reason: redact(reason).slice(0, 2000), files } }], { afterEnd: true });
    return { outcome: "failed" as const, reason };
  };
  if (run.github) {
    const { mergePullRequestByDecision } = await import("./github-ops");
    const result = await mergePullRequestByDecision(run, { by, stepKey });
    if (result.kind === "auth") return failed(`GitHub refused the App's credentials: ${result.message}`);
    if (!result.merged) return failed(result.reason);
    return { outcome: "merged" as const };
  }
  const result = await squashMerge({ repoPath: run.repoPath, branch: run.branch, baseBranch: run.config.git.baseBranch, runId, title: firstLine(run.request) });
  if (result.status === "conflict") return failed(result.reason, result.files);
  await append(runId, stepKey, [{ type: "PR_MERGED", payload: { number: null, sha: result.sha, method: "squash", by } }], { afterEnd: true });
  return { outcome: "merged" as const };
}

export async function decisionsOf(runId: string): Promise<string[]> {
  const db = await getDb();
  const rows = await db.select().from(gates).where(eq(gates.workflowRunId, runId)).orderBy(asc(gates.gateNumber));
  return rows
    .filter((g) => g.status !== "pending")
    .map((g) => `${g.kind} gate ${g.gateNumber}: ${g.decision ?? g.status}${g.notes ? ` — ${redact(g.notes).slice(0, 300)}` : ""}`);
}

export async function complete({ runId, stepKey }: { runId: string; stepKey: string }) {
  const run = await loadRun({ runId });
  await append(runId, stepKey, [{ type: "RUN_COMPLETED", payload: {} }]);
  await writeRecords(run, await lastValidationReport(runId));
  return { userId: run.userId };
}

/** How often a running turn looks whether its run has ended (cancel must stop it within a second or two). */
export const END_POLL_MS = 250;

/**
 * One signal for a long step of a stage: it fires when the run ends (a cancel) or when the stage's deadline passes,
 * polled against workflowClock (the clock the workflow's own deadline checks use) every END_POLL_MS.
 */
function stageSignal(runId: string, deadline?: number) {
  const cancelled = watchForEnd(runId);
  const overtime = new AbortController();
  const timer = deadline === undefined ? null : setInterval(() => workflowClock.now() > deadline && overtime.abort(new Error("stage deadline")), END_POLL_MS);
  return {
    signal: AbortSignal.any([cancelled.signal, overtime.signal]),
    cancelled: () => cancelled.signal.aborted,
    overtime: () => overtime.signal.aborted && !cancelled.signal.aborted,
    stop: () => {
      cancelled.stop();
      if (timer) clearInterval(timer);
    },
  };
}

/** An AbortSignal that fires when the run is found ended (cancelled, failed) while a long step runs. */
function watchForEnd(runId: string) {
  const controller = new AbortController();
  let checking = false;
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    endedStatus(runId)
      .then((status) => {
        if (status) controller.abort(new RunEndedError(status));
      })
      .catch(() => null)
      .finally(() => {
        checking = false;
      });
  }, END_POLL_MS);
  return { signal: controller.signal, stop: () => clearInterval(timer) };
}

async function endedStatus(runId: string): Promise<string | null> {
  const state = await getRunState({ id: runId });
  return state && TERMINAL_STATUSES.has(state.status) ? state.status : null;
}

/**
 * After a cancellation (the workflow function is stopped between or during steps): drop the sandbox and write the
 * run's records on its branch. A no-op for a run that is not cancelled.
 */
export async function cleanUpCancelled({ runId }: { runId: string }) {
  const state = await getRunState({ id: runId });
  if (state?.status !== "cancelled") return { userId: state?.userId ?? null, cleaned: false };
  const done = await finishUnsuccessfully({ runId, reason: null, stepKey: "cancelled" });
  return { userId: done.userId, cleaned: true };
}

/** The end of a run that failed or was cancelled: no sandbox left, the branch and a record of what happened kept. */
export async function finishUnsuccessfully({ runId, reason, stepKey }: { runId: string; reason: string | null; stepKey: string }) {
  const run = await loadRun({ runId }).catch(() => null);
  if (!run) return { userId: null };
  await releaseSandbox(await sandboxOptions(run)).catch(() => null);
  const state = await getRunState({ id: runId });
  if (state && !TERMINAL_STATUSES.has(state.status) && reason !== null) {
    await append(runId, stepKey, [{ type: "RUN_FAILED", payload: { reason: redact(reason).slice(0, 2000), stage: state.currentStage } }]).catch(
      (error) => {
        if (!(error instanceof RunEndedError)) throw error;
      },
    );
  }
  const branchExists = await git(run.repoPath, ["rev-parse", "--verify", "--quiet", `refs/heads/${run.branch}`], { allowFailure: true });
  if (branchExists.code === 0) await writeRecords(run, await lastValidationReport(runId));
  return { userId: run.userId };
}
