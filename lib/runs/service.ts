import { parseTasksMd, pastedTasksMd } from "@/lib/agents/tasks-md";
import { deadlineViews } from "./deadlines";
import { and, eq, or, sql } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { artifacts, chatDecisions, clarificationRequests, gates, modelCalls, projectMembers, users } from "@/lib/db/schema";
import { AppError, describeIssues } from "@/lib/errors";
import { createRun, decodeCursor, listRuns, runIdsInGroup } from "@/lib/db/queries/runs";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { newId } from "@/lib/ids";
import { getProject, listProjectsForUser } from "@/lib/projects/queries";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { existsSync } from "node:fs";
import { mergeConfig, resolveRunConfig, type RunStatus } from "@/lib/workflow";
import { applyOwnerFloor } from "@/lib/workflow/owner-floor";
import { readProjectConfig } from "@/lib/git";
import { cachePath } from "@/lib/github/git";
import type { Project } from "@/lib/projects/queries";
import { sandboxCapabilities } from "@/lib/sandbox";
import { costBreakdownForRun } from "./costs";
import { estimateReport } from "./estimate";
import { toRunDto } from "./dto";
import { instructionsOfRun } from "./instructions";
import { approachRequest } from "./approach";
import { routingForNewRun, routingWithFallbacks, type StageRouting } from "./routing";

type NewRun = {
  user: SessionUser;
  projectId: string;
  request: string;
  config?: Record<string, unknown>;
};

/** Authorization, config resolution and validation for a new run: the resolved config, or a typed 4xx. */
async function resolveNewRun({ user, projectId, config }: Omit<NewRun, "request">) {
  const project = await getProject({ id: projectId });
  if (!project) throw new AppError("not_found:project");
  await requireProjectRole({ user, projectId, action: "decide" });
  const defaultRouting: StageRouting = routingForNewRun();
  // Request config over project config over the repository's .autonomous/config.json.
  const fileDefaults = await repositoryDefaults(project, mergeConfig(project.defaultConfig ?? {}, config ?? {}));
  const resolved = resolveRunConfig({ input: config ?? {}, projectDefaults: mergeConfig(fileDefaults, project.defaultConfig ?? {}), defaultRouting });
  if (!resolved.success) {
    throw new AppError("bad_request:config", `config.${describeIssues(resolved.error.issues)}`);
  }
  if ((config as { sandbox?: unknown } | undefined)?.sandbox !== undefined) {
    throw new AppError("bad_request:config", "config.sandbox: can only be set in the project's default config (by a project owner), not per run.");
  }
  const sandbox = sandboxCapabilities();
  const allowUnisolated = (project.defaultConfig as { sandbox?: { allowUnisolated?: boolean } } | null)?.sandbox?.allowUnisolated === true;
  if (!sandbox.isolated && !allowUnisolated) {
    throw new AppError(
      "conflict:run",
      `Agent commands cannot be isolated on this server (${sandbox.warning}) Set "sandbox": {"allowUnisolated": true} in the project's default config to run them anyway.`,
    );
  }
  // A run's own routing without its key is a 400; a default's falls back, noted on the run (RUN_CREATED notes).
  const explicit = (config as { modelRouting?: Record<string, unknown> } | undefined)?.modelRouting;
  const { routing, notes, problems } = routingWithFallbacks({
    routing: resolved.data.modelRouting,
    explicit: typeof explicit === "object" && explicit !== null ? explicit : {},
    fallback: defaultRouting,
  });
  if (problems.length) throw new AppError("bad_request:config", problems.join(" "));
  // The owner's policy and budgets are a floor a run's config can only tighten (lib/workflow/owner-floor.ts).
  return { config: applyOwnerFloor({ config: { ...resolved.data, modelRouting: routing }, owner: project.defaultConfig, input: config }), notes };
}

/** Start a run for a user: authorization, config resolution and validation, then the run row and its first event. */
export async function startRun({
  id,
  followUp,
  ...input
}: NewRun & {
  /** A caller-chosen run id (webhooks: one stable id per delivery, so a retry cannot start a second run). */
  id?: string;
  /** A follow-up to a pull request review: work on that pull request's branch and push to it (see RUN_CREATED). */
  followUp?: { runId: string; pullRequest: number | null; branch: string };
}) {
  const { config, notes } = await resolveNewRun(input);
  // A tasks.md pasted into the request becomes the plan: a malformed one is the caller's to fix, before anything starts.
  const pasted = config.tasks.source === "none" ? null : pastedTasksMd(input.request);
  if (pasted !== null) parseTasksMd(pasted);
  return createRun({ projectId: input.projectId, userId: input.user.id, request: input.request, config, notes, ...(id ? { id } : {}), ...(followUp ? { followUp } : {}) });
}

/**
 * "Explore N approaches": N runs of one request, each told which approach it is (so a planner, the demo model too, can
 * take a different route for each), created in one transaction under one group id: all of them or none.
 */
export async function startApproaches({ approaches, approachNotes = [], ...input }: NewRun & { approaches: number; approachNotes?: string[] }) {
  const { config, notes } = await resolveNewRun(input);
  const groupId = newId("grp");
  const runs = await write(async (tx) => {
    const created = [];
    for (let i = 1; i <= approaches; i++) {
      const request = approachRequest({ request: input.request, index: i, of: approaches, note: approachNotes[i - 1] });
      created.push(await createRun({ projectId: input.projectId, userId: input.user.id, request, config, notes, groupId, tx }));
    }
    return created;
  });
  return { runs, groupId };
}

/** The runs started together under one group id, as far as the user may see them; 404 when none is visible. */
export async function getRunGroup({ user, groupId }: { user: SessionUser; groupId: string }) {
  const visible = [];
  for (const runId of await runIdsInGroup({ groupId })) {
    const run = await getVisibleRun({ user, runId }).catch((error: unknown) => {
      if (error instanceof AppError && error.type === "not_found") return null;
      throw error;
    });
    if (run) visible.push(run);
  }
  if (visible.length === 0) throw new AppError("not_found:run", "No such run group.");
  return { groupId, runs: visible.map(toRunDto) };
}

/**
 * The run-config defaults in the repository's `.autonomous/config.json` on the base branch the run will start from (a
 * local repository, or a GitHub project's cache clone once it exists). A malformed file is the caller's to fix: 400.
 */
async function repositoryDefaults(project: Project, merged: unknown): Promise<Record<string, unknown>> {
  const repoPath =
    project.repository.type === "local"
      ? project.repository.path
      : cachePath({ owner: project.repository.owner, repo: project.repository.repo });
  if (!existsSync(repoPath)) return {};
  const baseBranch = (merged as { git?: { baseBranch?: unknown } }).git?.baseBranch;
  const ref = typeof baseBranch === "string" && baseBranch ? baseBranch : "main";
  try {
    const defaults = (await readProjectConfig({ repoPath, ref })).defaults;
    // The repository never sets the policy on MCP tools (its own servers' tools would allow themselves).
    const policy = defaults.policy;
    if (policy && typeof policy === "object" && !Array.isArray(policy) && "mcp" in policy) {
      const { mcp: _dropped, ...rest } = policy as Record<string, unknown>;
      return { ...defaults, policy: rest };
    }
    return defaults;
  } catch (error) {
    if (error instanceof AppError && error.code === "bad_request:config") {
      throw new AppError("bad_request:config", `The repository's ${error.message} Fix the file on ${ref}, then start the run again.`);
    }
    return {};
  }
}

/** A run the user may see, or 404 (also for runs of projects the user is not a member of). */
export async function getVisibleRun({ user, runId, action = "read" }: { user: SessionUser; runId: string; action?: "read" | "decide" }) {
  const run = await getRunState({ id: runId });
  if (!run) throw new AppError("not_found:run");
  await requireProjectRole({ user, projectId: run.projectId, action, notFound: "not_found:run" });
  return run;
}

export async function getRunDetail({ user, runId }: { user: SessionUser; runId: string }) {
  const run = await getVisibleRun({ user, runId });
  const db = await getDb();
  const sandbox = sandboxCapabilities();
  const [gateRows, clarificationRows, artifactRows, costRows, peopleRows] = await Promise.all([
    db.select().from(gates).where(eq(gates.workflowRunId, runId)).orderBy(gates.gateNumber),
    db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, runId)).orderBy(clarificationRequests.createdAt),
    db.select().from(artifacts).where(eq(artifacts.workflowRunId, runId)).orderBy(artifacts.createdAt),
    db
      .select({
        usd: sql<number>`coalesce(sum(${modelCalls.costUsd}), 0)`,
        tokensIn: sql<number>`coalesce(sum(${modelCalls.tokensIn}), 0)`,
        tokensOut: sql<number>`coalesce(sum(${modelCalls.tokensOut}), 0)`,
        calls: sql<number>`count(*)`,
      })
      .from(modelCalls)
      .where(and(eq(modelCalls.workflowRunId, runId))),
    // Who may appear in the run (its author, the project's members): names to show instead of raw user ids.
    db
      .selectDistinct({ id: users.id, name: users.name, email: users.email })
      .from(users)
      .leftJoin(projectMembers, eq(projectMembers.userId, users.id))
      .where(or(eq(users.id, run.userId), eq(projectMembers.projectId, run.projectId))),
  ]);
  const deadlines = await deadlineViews({ runId });
  const names = new Map(peopleRows.map((p) => [p.id, p.name ?? p.email ?? p.id]));
  for (const view of Object.values(deadlines)) {
    // The backup approver by name, for the card ("escalates to …").
    const to = view.onTimeout.action === "escalate" ? view.onTimeout.to : null;
    if (to && "userId" in to) view.escalatesToName = names.get(to.userId) ?? null;
  }
  return {
    run: toRunDto(run),
    // With each its deadline (config.deadlines), or null: the cards count down to it.
    gates: gateRows.map((g) => ({ ...g, deadline: deadlines[g.id] ?? null })),
    clarifications: clarificationRows.map((c) => ({ ...c, deadline: deadlines[c.id] ?? null })),
    artifacts: artifactRows,
    cost: { ...(costRows[0] ?? { usd: 0, tokensIn: 0, tokensOut: 0, calls: 0 }), ...(await costBreakdownForRun({ runId })) },
    sandbox: { isolated: sandbox.isolated, warning: sandbox.warning },
    /** The plan gate's estimate beside what the stages took (null when no plan gate carried one). */
    estimate: await estimateReport({ runId }),
    /** The repository instructions (AGENTS.md …) the stages' prompts quoted: path, size, sha256, whether cut. */
    instructions: await instructionsOfRun({ runId }),
    people: Object.fromEntries(peopleRows.map((p) => [p.id, p.name ?? p.email ?? p.id])) as Record<string, string>,
    /** The decisions made from Slack or Telegram: the timeline says "by Ann from Slack" (no chat account ids). */
    chatOrigins: (
      await db
        .select({ subjectId: chatDecisions.subjectId, action: chatDecisions.action, provider: chatDecisions.provider, userId: chatDecisions.userId, at: chatDecisions.createdAt })
        .from(chatDecisions)
        .where(eq(chatDecisions.workflowRunId, runId))
        .orderBy(chatDecisions.createdAt)
    ).map((o) => ({ ...o, provider: o.provider as "slack" | "telegram", at: new Date(o.at).toISOString() })),
  };
}

/** How many events a snapshot carries at most; a longer log's remainder arrives through the stream, from the last one. */
const SNAPSHOT_EVENTS = 2_000;

/**
 * The run page's first render: the run as its projection stands at sequence N and its events 1..N, one consistent
 * picture (events are append-only, so those read after the projection are exactly the ones it was folded from, and
 * any newer one is left for the stream, which resumes after the last event given here). As JSON, like the API sends it.
 */
export async function getRunSnapshot({ user, runId }: { user: SessionUser; runId: string }) {
  const detail = await getRunDetail({ user, runId });
  const upTo = detail.run.lastSequence;
  const events = (await listEvents({ runId, after: 0, limit: SNAPSHOT_EVENTS }))
    .filter((e) => e.sequence <= upTo)
    .map((e) => ({ sequence: e.sequence, type: e.type, payload: e.payload, timestamp: new Date(e.timestamp).toISOString() }));
  return JSON.parse(JSON.stringify({ ...detail, events })) as typeof detail extends infer D ? Jsonified<D> & { events: SnapshotEvent[] } : never;
}

type SnapshotEvent = { sequence: number; type: string; payload: Record<string, unknown>; timestamp: string };
/** What a value becomes through JSON.stringify/parse: dates become strings. */
type Jsonified<T> = T extends Date ? string : T extends Array<infer U> ? Jsonified<U>[] : T extends object ? { [K in keyof T]: Jsonified<T[K]> } : T;

export async function listRunsForUser({
  user,
  projectId,
  status,
  cursor,
  limit,
  q,
}: {
  user: SessionUser;
  projectId?: string;
  status?: RunStatus[];
  cursor?: string;
  limit: number;
  q?: string;
}) {
  const memberships = await listProjectsForUser({ userId: user.id });
  let projectIds = memberships.map((p) => p.id);
  if (projectId) projectIds = projectIds.filter((id) => id === projectId);
  let decoded = null;
  if (cursor) {
    decoded = decodeCursor(cursor);
    if (!decoded) throw new AppError("bad_request:api", "cursor: is not a cursor this API returned");
  }
  const page = await listRuns({ projectIds, status, cursor: decoded, limit, search: q?.trim() || undefined });
  return { runs: page.runs.map(toRunDto), nextCursor: page.nextCursor };
}
