import { eq, sql } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { getEnv } from "@/lib/env";
import { updateMemory } from "@/lib/git";
import { isGitHubAuthError, type RepositoryRef } from "@/lib/github/app";
import { pushBranch, syncRepository } from "@/lib/github/git";
import {
  findPullRequest,
  getPullRequest,
  markReadyForReview,
  openPullRequest,
  pullRequestBody,
  pullRequestTitle,
  squashMergePullRequest,
  updatePullRequest,
  type PullRequestFacts,
  type PullRequestInfo,
} from "@/lib/github/pulls";
import { log } from "@/lib/log";
import { taskStatuses } from "@/lib/workflow/task-status";
import { colourByStatus, parseFlowGraph, validateMermaid } from "@/lib/mermaid";
import { redact } from "@/lib/redact";
import { releaseSandbox } from "@/lib/sandbox";
import type { PlanDocument } from "@/lib/workflow";
import { append, firstLine, followUpOf, loadRun, type RunContext } from "./context";
import { decisionsOf, lastValidationReport, writeRecords } from "./records";

/*
 * The GitHub side of a run, as durable step bodies (see ./context.ts): sync the cache clone before branching, push
 * and open a draft pull request once an implementation exists, and at delivery push the records, mark the pull
 * request ready when validation passed and squash-merge it when the config allows. Every GitHub effect is looked up
 * before it is made again, so a step retried after a crash never opens a second pull request.
 *
 * A 401 that survives a fresh installation token comes back as { kind: "auth" } and the workflow pauses the run with
 * its message; other failures throw and the executor retries the step.
 */

export type GitHubStepResult<T extends object = object> = ({ kind: "ok" } & T) | { kind: "auth"; message: string };

async function guarded<T extends object>(fn: () => Promise<T>): Promise<GitHubStepResult<T>> {
  try {
    return { kind: "ok", ...(await fn()) };
  } catch (error) {
    if (isGitHubAuthError(error)) return { kind: "auth", message: redact(error.message) };
    throw error;
  }
}

function refOf(run: RunContext): RepositoryRef {
  if (!run.github) throw new Error(`Run ${run.runId} is not on a GitHub project.`);
  return run.github;
}

/**
 * Before the run branch is created: the cache clone has GitHub's latest base branch, and for a follow-up run the pull
 * request's branch as GitHub has it (a person may have pushed to it since).
 */
export async function syncGitHub({ runId }: { runId: string }) {
  const run = await loadRun({ runId });
  const followUp = await followUpOf({ runId });
  return guarded(async () => {
    const { baseSha } = await syncRepository({ ref: refOf(run), baseBranch: run.config.git.baseBranch, ...(followUp ? { branches: [run.branch] } : {}) });
    return { baseSha };
  });
}

async function pullRequestFacts(run: RunContext): Promise<PullRequestFacts> {
  const events = await listEvents({ runId: run.runId, limit: 100_000 });
  let plan: PlanDocument | null = null;
  const completed: string[] = [];
  let validation: PullRequestFacts["validation"] = { status: "pending" };
  for (const e of events) {
    if ((e.type === "PLAN_CREATED" || e.type === "PLAN_EDITED") && e.payload.plan) plan = e.payload.plan;
    if (e.type === "TASK_COMPLETED") completed.push(e.payload.taskId);
    if (e.type === "VALIDATION_PASSED") validation = { status: "passed", score: e.payload.score ?? null, report: e.payload.report ?? null };
    if (e.type === "VALIDATION_FAILED") validation = { status: "failed", score: e.payload.score ?? null, report: e.payload.report ?? null };
  }
  const diagram = plan ? await colouredDiagram(plan, events) : null;
  const db = await getDb();
  const [cost] = await db
    .select({ usd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)` })
    .from(modelCalls)
    .where(eq(modelCalls.workflowRunId, run.runId));
  return {
    runId: run.runId,
    runUrl: `${getEnv().publicUrl.replace(/\/+$/, "")}/runs/${run.runId}`,
    request: redact(run.request),
    plan,
    completedTasks: completed,
    diagram,
    validation,
    costUsd: cost?.usd ?? 0,
  };
}

/**
 * The plan's diagram coloured by where each task stands, for the pull request body (refreshed with it at every push
 * and at delivery). Anything that keeps it from parsing leaves the plain diagram: a body is never held up by a colour.
 */
async function colouredDiagram(plan: PlanDocument, events: Array<{ type: string; payload: unknown }>): Promise<string | null> {
  try {
    const graph = await parseFlowGraph(plan.mermaid);
    const { source, coloured } = colourByStatus({ source: plan.mermaid, graph, tasks: plan.tasks, statuses: taskStatuses(events) });
    if (!Object.keys(coloured).length) return null;
    await validateMermaid(source);
    return source;
  } catch (error) {
    log.warn("the plan diagram could not be coloured for the pull request", { error: error instanceof Error ? error.message : String(error) });
    return null;
  }
}

async function push(run: RunContext, stepKey: string) {
  const { sha } = await pushBranch({ ref: refOf(run), branch: run.branch });
  await append(run.runId, `${stepKey}:push`, [{ type: "BRANCH_PUSHED", payload: { branch: run.branch, sha, remote: `github:${refOf(run).owner}/${refOf(run).repo}` } }]);
  return sha;
}

/** The run's pull request: the one recorded, else one GitHub already has for the branch (a retried step), else a new one. */
async function ensurePullRequest(run: RunContext, stepKey: string, facts: PullRequestFacts, draft: boolean): Promise<PullRequestInfo> {
  const ref = refOf(run);
  const state = await getRunState({ id: run.runId });
  const title = pullRequestTitle(facts);
  const body = pullRequestBody(facts);
  const known = state?.pullRequest ? await getPullRequest(ref, state.pullRequest.number) : await findPullRequest(ref, run.branch);
  if (known) {
    if (known.state === "open") await updatePullRequest(ref, known.number, { title, body });
    if (!state?.pullRequest) {
      await append(run.runId, `${stepKey}:pr`, [{ type: "PR_OPENED", payload: { number: known.number, url: known.url, draft: known.draft } }]);
    }
    return known;
  }
  const opened = await openPullRequest(ref, { branch: run.branch, baseBranch: run.config.git.baseBranch, title, body, draft });
  await append(run.runId, `${stepKey}:pr`, [{ type: "PR_OPENED", payload: { number: opened.number, url: opened.url, draft: opened.draft } }]);
  return opened;
}

/** After an implementation attempt: push the branch and open (or refresh) the draft pull request. */
export async function publishDraft({ runId, stepKey }: { runId: string; stepKey: string }) {
  const run = await loadRun({ runId });
  return guarded(async () => {
    await push(run, stepKey);
    if (!run.config.git.createPR) return { pullRequest: null as number | null };
    const pr = await ensurePullRequest(run, stepKey, await pullRequestFacts(run), true);
    return { pullRequest: pr.number as number | null };
  });
}

/**
 * Delivery for a GitHub project: records and memory committed on the run branch, pushed; the pull request opened or
 * refreshed, marked ready when validation passed, and squash-merged when config.git.autoMerge allows.
 */
export async function deliverGitHub({ runId, stepKey }: { runId: string; stepKey: string }) {
  const run = await loadRun({ runId });
  const ref = refOf(run);
  await releaseSandbox({ runId, repoPath: run.repoPath, ref: run.branch, branch: run.branch, excludePaths: [] });
  // Pushed with the delivery, these records are what the PR and (after a merge) the base branch keep: they say what
  // the run is once delivered (completed), not "running" as it is for the instant before its last step.
  await writeRecords(run, await lastValidationReport(runId), { completing: true });
  const state = await getRunState({ id: runId });
  const passed = state?.lastValidation === "passed";
  await updateMemory({
    repoPath: run.repoPath,
    branch: run.branch,
    runId,
    title: firstLine(run.request),
    outcome: `Delivered on ${run.branch} to ${ref.owner}/${ref.repo}${run.config.git.createPR ? " as a pull request" : ""}${passed ? " (validation passed)" : " (accepted without passing validation)"}`,
    decisions: await decisionsOf(runId),
  });
  return guarded(async () => {
    const sha = await push(run, stepKey);
    if (!run.config.git.createPR) return { pullRequest: null as number | null, merge: "skipped" as string };
    const facts = await pullRequestFacts(run);
    let pr = await ensurePullRequest(run, stepKey, facts, !passed);
    if (passed && pr.draft && pr.state === "open") {
      await markReadyForReview(ref, pr.nodeId);
      pr = { ...pr, draft: false };
      await append(runId, `${stepKey}:ready`, [{ type: "PR_UPDATED", payload: { number: pr.number, draft: false } }]);
    }
    if (!run.config.git.autoMerge || !passed) return { pullRequest: pr.number as number | null, merge: "skipped" as string };
    const current = await getPullRequest(ref, pr.number);
    const merge = current.merged
      ? { merged: true as const, sha: current.mergeSha ?? sha }
      : await squashMergePullRequest(ref, { number: pr.number, title: pullRequestTitle(facts), sha });
    if (!merge.merged) {
      log.warn("pull request not merged", { runId, number: pr.number, reason: merge.reason });
      return { pullRequest: pr.number as number | null, merge: `not merged: ${merge.reason}` };
    }
    const after = await getRunState({ id: runId });
    if (!after?.merged) {
      await append(runId, `${stepKey}:merge`, [{ type: "PR_MERGED", payload: { number: pr.number, sha: merge.sha, method: "squash" } }]);
    }
    return { pullRequest: pr.number as number | null, merge: "merged" as string };
  });
}

/** A person's merge decision on a GitHub project: squash-merge the run's pull request (PR_MERGED), or say why not. */
export async function mergePullRequestByDecision(run: RunContext, { by, stepKey }: { by: string; stepKey: string }) {
  const ref = refOf(run);
  const state = await getRunState({ id: run.runId });
  const number = state?.pullRequest?.number;
  if (!number) return { kind: "ok" as const, merged: false as const, reason: "the run has no pull request to merge (createPR was off)" };
  return guarded(async () => {
    const current = await getPullRequest(ref, number);
    const merge = current.merged
      ? { merged: true as const, sha: current.mergeSha ?? null }
      : await squashMergePullRequest(ref, { number, title: pullRequestTitle(await pullRequestFacts(run)) });
    if (!merge.merged) return { merged: false as const, reason: `GitHub did not merge pull request #${number}: ${merge.reason}` };
    await append(run.runId, stepKey, [{ type: "PR_MERGED", payload: { number, sha: merge.sha, method: "squash", by } }], { afterEnd: true });
    return { merged: true as const, reason: null };
  });
}
