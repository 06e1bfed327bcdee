import { and, asc, desc, eq, inArray, sql } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { accounts, githubDeliveries, githubRepositories, projects, users, workflowRuns } from "@/lib/db/schema";
import { appendEvents, getRunState } from "@/lib/db/event-store";
import { githubIdKey, githubNameKey } from "@/lib/db/repository-key";
import { isAppError } from "@/lib/errors";
import { stableId } from "@/lib/ids";
import { readMemorySnapshot } from "@/lib/git";
import { log } from "@/lib/log";
import { runConfigSchema } from "@/lib/workflow";
import { isGitHubAuthError } from "./app";
import { syncRepository } from "./git";
import { listReviewComments, type ReviewComment } from "./pulls";

/*
 * What a webhook delivery does, run by the github-webhook Inngest function. Each handler returns a one-line outcome
 * (stored on the delivery) and the ids of runs it created, which the function then announces.
 */

export type DeliveryOutcome = { outcome: string; startRuns: string[] };

/**
 * Creates a run (lib/runs/service's startRun, passed in by the caller: GitHub's handlers sit below the run services and
 * do not import them). Throws an AppError when the run may not start.
 */
export type StartRun = (args: {
  id: string;
  user: { id: string; name: string | null; via: "api-token" };
  projectId: string;
  request: string;
  config?: Record<string, unknown>;
  followUp?: { runId: string; pullRequest: number | null; branch: string };
}) => Promise<{ id: string }>;

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {});
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const num = (v: unknown): number | null => (typeof v === "number" ? v : null);

/**
 * Every side effect of a delivery is idempotent per delivery: a run it starts has an id derived from the delivery (a
 * retry finds it instead of starting another), events are appended only when the run's state still lacks them, and the
 * outcome is written through the process's one write queue (a write beside it could hit SQLITE_BUSY after the run was
 * started, and the retry used to start a second one).
 */
export async function handleDelivery({ deliveryId, startRun }: { deliveryId: string; startRun: StartRun }): Promise<DeliveryOutcome> {
  const db = await getDb();
  const row = await db.query.githubDeliveries.findFirst({ where: eq(githubDeliveries.id, deliveryId) });
  if (!row || row.event === "replay-guard") return { outcome: "unknown delivery", startRuns: [] };
  // A retried function after the work was done: the same answer, nothing done twice.
  if (row.processedAt && row.outcome) return JSON.parse(row.outcome) as DeliveryOutcome;
  const delivery = { id: deliveryId, receivedAt: row.receivedAt.getTime(), startRun };
  const result = await dispatch(row.event, row.payload, delivery);
  await write(async (tx) => {
    await tx
      .update(githubDeliveries)
      .set({ processedAt: new Date(), outcome: JSON.stringify(result) })
      .where(eq(githubDeliveries.id, deliveryId));
  });
  log.info("github webhook handled", { deliveryId, event: row.event, action: row.action, outcome: result.outcome });
  return result;
}

type Delivery = { id: string; receivedAt: number; startRun: StartRun };

/** The id of the n-th run a delivery starts: the same on every retry of the delivery's handling. */
const deliveryRunId = (delivery: Delivery, n = 0) => stableId("run", { key: `github-delivery:${delivery.id}:${n}`, time: delivery.receivedAt });

/** A run this delivery already started (a retry after a crash or SQLITE_BUSY): the outcome it had, without a second run. */
async function startedBefore(runId: string): Promise<boolean> {
  return (await getRunState({ id: runId })) !== null;
}

/**
 * Start the delivery's run unless it exists. Two concurrent handlings of one delivery both pass the check; the second
 * insert then fails on the run id, and that counts as "already started".
 */
async function startRunOnce(delivery: Delivery, args: Parameters<StartRun>[0]) {
  try {
    return await delivery.startRun(args);
  } catch (error) {
    if (!isAppError(error) && (await startedBefore(args.id))) return { id: args.id };
    throw error;
  }
}

async function dispatch(event: string, payload: Json, delivery: Delivery): Promise<DeliveryOutcome> {
  const action = str(payload.action);
  switch (event) {
    case "pull_request":
      if (action === "closed") return pullRequestClosed(payload);
      return ignored(`pull_request ${action}`);
    case "pull_request_review":
      if (action === "submitted" && str(obj(payload.review).state)?.toLowerCase() === "changes_requested") return changesRequested(payload, delivery);
      return ignored(`pull_request_review ${action}`);
    case "issue_comment":
      if (action === "created") return issueComment(payload, delivery);
      return ignored(`issue_comment ${action}`);
    case "installation":
    case "installation_repositories":
      return installationChanged(event, action, payload);
    default:
      return ignored(event);
  }
}

const ignored = (why: string): DeliveryOutcome => ({ outcome: `ignored: ${why}`, startRuns: [] });

// ---------------------------------------------------------------------------------------------------------------------
// Lookups

function repositoryOf(payload: Json): { owner: string; repo: string; id: number | null } | null {
  const repository = obj(payload.repository);
  const owner = str(obj(repository.owner).login);
  const repo = str(repository.name);
  return owner && repo ? { owner, repo, id: num(repository.id) } : null;
}

/**
 * The one project bound to this GitHub repository (a repository has at most one): by GitHub's repository id, else by
 * name for a binding made while no id was known. An array, empty or of one.
 */
async function projectsFor(ref: { owner: string; repo: string; id: number | null }) {
  const db = await getDb();
  for (const key of [ref.id ? githubIdKey(ref.id) : null, githubNameKey(ref)]) {
    if (!key) continue;
    const project = await db.query.projects.findFirst({ where: eq(projects.repositoryKey, key) });
    if (project) return [project];
  }
  return [];
}

/**
 * The run whose branch a pull request comes from: the newest one, since follow-up runs continue the branch of the run
 * they follow (a merge or a further review belongs to the latest work on it).
 */
async function runForPullRequest(payload: Json) {
  const ref = repositoryOf(payload);
  const branch = str(obj(obj(payload.pull_request).head).ref);
  if (!ref || !branch) return null;
  const candidates = await projectsFor(ref);
  if (!candidates.length) return null;
  const db = await getDb();
  const [row] = await db
    .select({ id: workflowRuns.id, projectId: workflowRuns.projectId })
    .from(workflowRuns)
    .where(and(eq(workflowRuns.branch, branch), inArray(workflowRuns.projectId, candidates.map((p) => p.id))))
    .orderBy(desc(workflowRuns.createdAt), desc(workflowRuns.id))
    .limit(1);
  if (!row) return null;
  const state = await getRunState({ id: row.id });
  const project = candidates.find((p) => p.id === row.projectId)!;
  return state ? { state, project, ref } : null;
}

/** The Gatehouse user who signed in with this GitHub account (Auth.js accounts row, provider "github"). */
async function userForGitHubAccount(githubUserId: number) {
  const db = await getDb();
  const [row] = await db
    .select({ id: users.id, name: users.name })
    .from(accounts)
    .innerJoin(users, eq(users.id, accounts.userId))
    .where(and(eq(accounts.provider, "github"), eq(accounts.providerAccountId, String(githubUserId))))
    .limit(1);
  return row ?? null;
}

// ---------------------------------------------------------------------------------------------------------------------
// pull_request closed

async function pullRequestClosed(payload: Json): Promise<DeliveryOutcome> {
  const found = await runForPullRequest(payload);
  if (!found) return ignored("pull request of no Gatehouse run");
  const { state, project, ref } = found;
  const pr = obj(payload.pull_request);
  const number = num(pr.number) ?? num(payload.number) ?? 0;
  if (pr.merged === true) {
    if (!state.merged) {
      if (state.status === "failed" || state.status === "cancelled") return ignored(`run ${state.id} ended ${state.status}; merge not recorded`);
      await appendEvents(state.id, [{ type: "PR_MERGED", payload: { number, sha: str(pr.merge_commit_sha) } }]);
    }
    const memory = await refreshProjectMemory(project.id, ref, str(obj(pr.base).ref) ?? "main");
    return { outcome: `pr_merged ${state.id}${memory ? "; memory updated" : ""}`, startRuns: [] };
  }
  if (state.pullRequest && state.pullRequest.state !== "closed") {
    await appendEvents(state.id, [{ type: "PR_CLOSED", payload: { number } }]);
  }
  return { outcome: `pr_closed ${state.id}`, startRuns: [] };
}

/**
 * After a merge: fetch the base branch into the cache clone (the merged run's memory entry is on it now) and keep the
 * project's cached copy of .autonomous/memory.md current. Git stays the source of truth; a failure only logs.
 */
async function refreshProjectMemory(projectId: string, ref: { owner: string; repo: string }, baseBranch: string): Promise<boolean> {
  try {
    const { repoPath } = await syncRepository({ ref, baseBranch });
    const memory = await readMemorySnapshot({ repoPath, ref: `refs/heads/${baseBranch}` });
    if (memory === null) return false;
    await write(async (tx) => {
      await tx.update(projects).set({ memory, updatedAt: new Date() }).where(eq(projects.id, projectId));
    });
    return true;
  } catch (error) {
    if (!isGitHubAuthError(error)) log.warn("could not refresh project memory after a merge", { projectId, error: String(error) });
    else log.warn("could not refresh project memory: GitHub refused the app's credentials", { projectId });
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// pull_request_review: changes requested → a follow-up run (when the project enables it)

/** defaultConfig.github.followUpOnReview of the project. */
function followUpEnabled(defaultConfig: Record<string, unknown>): boolean {
  const parsed = runConfigSchema.shape.github.safeParse(defaultConfig.github);
  return parsed.success && parsed.data?.followUpOnReview === true;
}

/** At most this many inline comments go into a follow-up's request (a huge review would crowd out the rest). */
const MAX_REVIEW_COMMENTS = 50;

/**
 * The review's inline comments, fetched with the App's token (the webhook carries only the summary). When GitHub
 * refuses the App's credentials or answers 4xx (the review or pull request is gone) the follow-up still starts, with
 * the summary and a note; other failures (5xx, network) throw, so the delivery's step is retried.
 */
async function reviewComments(ref: { owner: string; repo: string }, number: number | null, reviewId: number | null) {
  if (!number || !reviewId) return { comments: [] as ReviewComment[], note: null };
  try {
    return { comments: await listReviewComments(ref, { number, reviewId }), note: null };
  } catch (error) {
    const status = (error as { status?: number }).status;
    if (!isGitHubAuthError(error) && !(typeof status === "number" && status >= 400 && status < 500)) throw error;
    log.warn("could not fetch a review's inline comments", { owner: ref.owner, repo: ref.repo, number, status: status ?? null });
    return { comments: [] as ReviewComment[], note: "(The review's inline comments could not be fetched; see the pull request.)" };
  }
}

function describeComments(comments: ReviewComment[]): string[] {
  if (!comments.length) return [];
  const shown = comments.slice(0, MAX_REVIEW_COMMENTS).map((c) => {
    const body = c.body.trim().replace(/\n+/g, " ").slice(0, 2_000);
    return `- ${c.path}${c.line !== null ? `:${c.line}` : ""} — ${body}`;
  });
  const more = comments.length > MAX_REVIEW_COMMENTS ? [`- … and ${comments.length - MAX_REVIEW_COMMENTS} more on the pull request`] : [];
  return ["", "Inline comments (file:line — comment):", ...shown, ...more];
}

/**
 * A follow-up run continues the pull request: it works on the PR's branch (the run's own, refreshed from GitHub),
 * with the review's summary and inline comments in its request, and pushes to the same pull request.
 */
async function changesRequested(payload: Json, delivery: Delivery): Promise<DeliveryOutcome> {
  const found = await runForPullRequest(payload);
  if (!found) return ignored("review on a pull request of no Gatehouse run");
  const { state, project, ref } = found;
  if (!followUpEnabled(project.defaultConfig)) return ignored("follow-up on review is not enabled for the project");
  const pr = obj(payload.pull_request);
  if (str(pr.state) === "closed") return ignored(`review on closed pull request of run ${state.id}`);
  if (!state.branch) return ignored(`run ${state.id} has no branch to follow up on`);
  const review = obj(payload.review);
  const reviewer = str(obj(review.user).login) ?? "a reviewer";
  const number = num(pr.number);
  const runId = deliveryRunId(delivery);
  if (await startedBefore(runId)) return { outcome: `follow_up ${runId} of ${state.id}`, startRuns: [runId] };
  const { comments, note } = await reviewComments(ref, number, num(review.id));
  const request = [
    state.originalRequest,
    "",
    "---",
    `Follow-up to run ${state.id}${number ? ` (pull request #${number})` : ""}: @${reviewer} requested changes.`,
    "",
    "Reviewer feedback:",
    (str(review.body) ?? "").trim() || "(no summary given; see the review comments)",
    ...describeComments(comments),
    ...(note ? ["", note] : []),
  ].join("\n");
  const { modelRouting, ...config } = state.config as Record<string, unknown>;
  const run = await startRunOnce(delivery, {
    id: runId,
    user: { id: state.userId, name: null, via: "api-token" },
    projectId: project.id,
    request,
    config: { ...config, modelRouting },
    followUp: { runId: state.id, pullRequest: number, branch: state.branch },
  }).catch((error) => {
    if (isAppError(error)) return null;
    throw error;
  });
  if (!run) return ignored(`the follow-up run could not be started for run ${state.id}`);
  return { outcome: `follow_up ${run.id} of ${state.id}`, startRuns: [run.id] };
}

// ---------------------------------------------------------------------------------------------------------------------
// issue_comment "/gatehouse <request>" from a project member → a new run

const COMMAND = /^\/gatehouse[ \t]+(\S[\s\S]*)$/;

async function issueComment(payload: Json, delivery: Delivery): Promise<DeliveryOutcome> {
  const comment = obj(payload.comment);
  const body = (str(comment.body) ?? "").trim();
  const match = COMMAND.exec(body);
  if (!match) return ignored("comment without a /gatehouse command");
  const author = obj(comment.user);
  if (str(author.type) === "Bot") return ignored("comment by a bot");
  const githubUserId = num(author.id);
  const ref = repositoryOf(payload);
  if (!githubUserId || !ref) return ignored("comment without an author or repository");
  const user = await userForGitHubAccount(githubUserId);
  if (!user) return ignored(`@${str(author.login) ?? githubUserId} has no Gatehouse account linked to GitHub`);
  const [project] = await projectsFor(ref);
  if (!project) return ignored(`no project is bound to ${ref.owner}/${ref.repo}`);
  const issue = obj(payload.issue);
  const source = str(issue.html_url);
  const request = `${match[1]!.trim()}${source ? `\n\n(Requested by @${str(author.login)} on ${source})` : ""}`;
  const runId = deliveryRunId(delivery);
  if (await startedBefore(runId)) return { outcome: `run ${runId} from a comment by @${str(author.login)}`, startRuns: [runId] };
  try {
    const run = await startRunOnce(delivery, { id: runId, user: { id: user.id, name: user.name, via: "api-token" }, projectId: project.id, request });
    return { outcome: `run ${run.id} from a comment by @${str(author.login)}`, startRuns: [run.id] };
  } catch (error) {
    // Not a member (404) or a viewer (403): a comment never starts work for someone who could not start it here.
    if (isAppError(error) && (error.status === 403 || error.status === 404)) return ignored(`@${str(author.login)} may not start runs on the project`);
    if (isAppError(error) && error.status === 400) return ignored(`the request was refused: ${error.message}`);
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// installation / installation_repositories → repositories available for projects

type RepoPayload = { id: number; name: string; full_name: string; private?: boolean };

function reposOf(value: unknown): RepoPayload[] {
  return (Array.isArray(value) ? value : [])
    .map(obj)
    .filter((r) => num(r.id) !== null && str(r.full_name) && str(r.name))
    .map((r) => ({ id: r.id as number, name: r.name as string, full_name: r.full_name as string, private: r.private === true }));
}

async function installationChanged(event: string, action: string | null, payload: Json): Promise<DeliveryOutcome> {
  const installationId = num(obj(payload.installation).id);
  if (!installationId) return ignored(`${event} without an installation`);
  if (event === "installation" && (action === "deleted" || action === "suspend")) {
    await write(async (tx) => {
      await tx.delete(githubRepositories).where(eq(githubRepositories.installationId, installationId));
    });
    return { outcome: `installation ${installationId} ${action}: its repositories removed`, startRuns: [] };
  }
  const added = event === "installation" ? reposOf(payload.repositories) : reposOf(payload.repositories_added);
  const removed = event === "installation_repositories" ? reposOf(payload.repositories_removed) : [];
  // Upserts and deletes: applying the same delivery twice leaves the same rows.
  await write(async (tx) => {
    for (const r of added) {
      const [owner = "", name = r.name] = r.full_name.split("/");
      const values = { id: r.id, installationId, owner, name, fullName: r.full_name, private: !!r.private, updatedAt: new Date() };
      await tx.insert(githubRepositories).values(values).onConflictDoUpdate({ target: githubRepositories.id, set: values });
    }
    if (removed.length) await tx.delete(githubRepositories).where(inArray(githubRepositories.id, removed.map((r) => r.id)));
  });
  return { outcome: `installation ${installationId}: ${added.length} repositories added, ${removed.length} removed`, startRuns: [] };
}

/** Repositories the app is installed on, for connecting a project. */
export async function listInstallationRepositories() {
  const db = await getDb();
  const rows = await db.select().from(githubRepositories).orderBy(asc(githubRepositories.fullName));
  return rows.map((r) => ({ id: r.id, installationId: r.installationId, owner: r.owner, repo: r.name, fullName: r.fullName, private: r.private }));
}
