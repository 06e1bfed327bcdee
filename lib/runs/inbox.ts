import { and, count, desc, eq, inArray, isNotNull, isNull, ne, or, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { z } from "zod";
import { getDb, write } from "@/lib/db";
import { clarificationRequests, gates, inboxItemStates, projectMembers, projects, workflowRuns, type GateKind, type ProjectRole } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import { requireProjectRole, ROLE_RANK, rolesAllowedTo, type SessionUser } from "@/lib/auth/guard";
import { RUN_STATUSES, TERMINAL_STATUSES } from "@/lib/workflow/types";
import { eventTypeIn } from "@/lib/db/event-store";
import { mayDecideEscalated } from "./deadlines";
import { runTitle } from "./title";
import { inboxDecision } from "./inbox-decision";

/*
 * The per-person inbox: the open gates and clarification questions a person may decide, across all their projects.
 * Which items exist and whether they are still open is read from the runs' own rows (gates, clarification_requests,
 * workflow_runs); only what this person did with an item (read, done) is stored, in inbox_item_states. Who may decide
 * is the decision routes' rule (requireProjectRole with action "decide"), asked here for every project at once, plus
 * the backup approvers a decision's deadline escalated it to (DECISION_ESCALATED; mayDecideEscalated in deadlines.ts):
 * from the escalation on, a viewer named by it (or holding the role it names) has the item too, and may mark it.
 */

export type InboxItemKind = "gate" | "question";
export type InboxFilter = "open" | "unread" | "done" | "all";

export type InboxItem = {
  /** The gate's or the question's own id (`gate_…` / `clr_…`): POST /api/inbox/:itemId takes it. */
  id: string;
  kind: InboxItemKind;
  /** The gate's kind (plan, fix, escalation, budget …); null for a question. */
  gateKind: GateKind | null;
  /** What is asked: the question, or what the gate decides. */
  summary: string;
  runId: string;
  runTitle: string;
  projectId: string;
  projectName: string;
  openedAt: string;
  read: boolean;
  done: boolean;
  /** Why it is done: someone decided it (or its run ended), or this person marked it done; null while open. */
  doneReason: "decided" | "marked" | null;
  /** What was decided, in words ("Approved", "Answered: French", "Not decided: the run was cancelled"); null while open. */
  decision: string | null;
  /** Where to decide it: the run page, at the gate's or the question's card. */
  link: string;
  /** When the decision is due (config.deadlines, fixed when it opened); null without a deadline. */
  deadline: string | null;
  /** The deadline passed and the decision was escalated to a backup approver (DECISION_ESCALATED). */
  escalated: boolean;
  /** This person may decide it only as that backup approver (their role alone would not let them). */
  escalatedToYou: boolean;
};

export const INBOX_FILTERS = ["open", "unread", "done", "all"] as const satisfies readonly InboxFilter[];

export const inboxQuerySchema = z.strictObject({
  filter: z.enum(INBOX_FILTERS, { error: 'filter: must be "open", "unread", "done" or "all"' }).default("open"),
  limit: z.coerce
    .number({ error: "limit: must be a number" })
    .int("limit: must be a whole number")
    .min(1, "limit: at least 1")
    .max(200, "limit: at most 200")
    .default(100),
});

export const inboxActionSchema = z.strictObject({
  action: z.enum(["read", "unread", "done"], { error: 'action: must be "read", "unread" or "done"' }),
});

const TERMINAL = [...TERMINAL_STATUSES];
/** Spelled out rather than "not terminal", so the open inbox (read every second by each stream) can use the status index. */
const LIVE = RUN_STATUSES.filter((status) => !TERMINAL_STATUSES.has(status));
const DECIDING_ROLES = rolesAllowedTo("decide");

const GATE_SUMMARY: Record<GateKind, string> = {
  plan: "Approve, edit or reject the plan",
  implementation: "Approve the implementation",
  fix: "Validation failed: retry, accept or cancel",
  escalation: "A question escalated to you",
  budget: "A budget was reached: raise it, finish the task, or cancel",
  timeout: "A stage ran out of time",
  conflict: "The merge has a conflict",
  policy: "A risky action needs approval",
};

type Row = {
  id: string;
  gateKind: GateKind | null;
  status: string;
  decision: string | null;
  response: unknown;
  question: string | null;
  createdAt: Date;
  runId: string;
  request: string;
  runStatus: string;
  projectId: string;
  projectName: string;
  readAt: Date | null;
  doneAt: Date | null;
  role: ProjectRole;
  deadlineAt: number | null;
  escalated: number;
};

/** A role's rank in SQL, to compare a member's role with the role a decision escalated to (as mayDecideEscalated does). */
const rankOf = (role: SQL) =>
  sql`(CASE ${role} ${sql.join(
    Object.entries(ROLE_RANK).map(([name, rank]) => sql`WHEN ${name} THEN ${sql.raw(String(rank))}`),
    sql` `,
  )} ELSE 99 END)`;

/**
 * The escalation events of this item's run, through the (run, type) index: a run that never escalated costs one index
 * probe. `toMe`: only those whose backup approver is this person (by name, or by a role at or below theirs).
 */
function escalatedSql({ idCol, userId, toMe }: { idCol: SQLiteColumn; userId: string; toMe: boolean }): SQL {
  const whom = toMe
    ? sql` AND (json_extract(e.payload, '$.to.userId') = ${userId} OR ${rankOf(sql`${projectMembers.role}`)} >= ${rankOf(sql`json_extract(e.payload, '$.to.role')`)})`
    : sql``;
  return sql`EXISTS (SELECT 1 FROM workflow_events AS e WHERE e.workflow_run_id = ${workflowRuns.id} AND ${eventTypeIn(["DECISION_ESCALATED"], sql`e.type`)} AND json_extract(e.payload, '$.subject.id') = ${idCol}${whom})`;
}

/** The deadline fixed when the item opened, from its opening event (the (run, type) index finds it). */
const requestedDeadline = (type: "APPROVAL_REQUESTED" | "CLARIFICATION_REQUESTED", key: string, idCol: SQLiteColumn) =>
  sql<number | null>`(SELECT json_extract(e.payload, '$.deadline.at') FROM workflow_events AS e WHERE e.workflow_run_id = ${workflowRuns.id} AND ${eventTypeIn([type], sql`e.type`)} AND json_extract(e.payload, ${`$.${key}`}) = ${idCol} LIMIT 1)`;

/** The two kinds of item, each as its table, the column that says "decided", and its card's anchor on the run page. */
function sources(userId: string) {
  const runDecidedOrEnded = (status: SQLiteColumn) => or(ne(status, "pending"), inArray(workflowRuns.status, TERMINAL))!;
  const pendingInLiveRun = (status: SQLiteColumn) => and(eq(status, "pending"), inArray(workflowRuns.status, LIVE))!;
  return [
    {
      kind: "gate" as const,
      table: gates,
      idCol: gates.id,
      createdCol: gates.createdAt,
      runCol: gates.workflowRunId,
      decided: runDecidedOrEnded(gates.status),
      pending: pendingInLiveRun(gates.status),
      select: {
        id: gates.id,
        gateKind: gates.kind,
        status: gates.status,
        decision: gates.decision,
        response: sql<unknown>`null`,
        // A gate's own one-line summary when it has one (a fix gate about a stopped implementer), else the kind's.
        question: sql<string | null>`coalesce(json_extract(${gates.context}, '$.question'), json_extract(${gates.context}, '$.summary'))`,
        createdAt: gates.createdAt,
        deadlineAt: requestedDeadline("APPROVAL_REQUESTED", "gateId", gates.id),
      },
    },
    {
      kind: "question" as const,
      table: clarificationRequests,
      idCol: clarificationRequests.id,
      createdCol: clarificationRequests.createdAt,
      runCol: clarificationRequests.workflowRunId,
      decided: runDecidedOrEnded(clarificationRequests.status),
      pending: pendingInLiveRun(clarificationRequests.status),
      select: {
        id: clarificationRequests.id,
        gateKind: sql<GateKind | null>`null`,
        status: clarificationRequests.status,
        decision: sql<string | null>`null`,
        response: clarificationRequests.response,
        question: clarificationRequests.question,
        createdAt: clarificationRequests.createdAt,
        deadlineAt: requestedDeadline("CLARIFICATION_REQUESTED", "clarificationId", clarificationRequests.id),
      },
    },
  ].map((s) => ({
    ...s,
    userId,
    /** Whom the item is for: a member whose role may decide, or the backup approver it escalated to. */
    visible: or(inArray(projectMembers.role, DECIDING_ROLES), escalatedSql({ idCol: s.idCol, userId, toMe: true }))!,
  }));
}

type Source = ReturnType<typeof sources>[number];

function filterCondition(source: Source, filter: InboxFilter): SQL | undefined {
  const done = or(source.decided, isNotNull(inboxItemStates.doneAt))!;
  switch (filter) {
    case "open":
      return and(source.pending, isNull(inboxItemStates.doneAt));
    case "unread":
      return and(source.pending, isNull(inboxItemStates.doneAt), isNull(inboxItemStates.readAt));
    case "done":
      return done;
    case "all":
      return undefined;
  }
}

/** The items of one kind this person may decide, joined with their own state, newest first. */
async function selectRows({ source, where, limit }: { source: Source; where?: SQL; limit?: number }): Promise<Row[]> {
  const db = await getDb();
  const query = db
    .select({
      ...source.select,
      runId: workflowRuns.id,
      // A title needs only the request's first lines.
      request: sql<string>`substr(${workflowRuns.originalRequest}, 1, 2000)`,
      runStatus: workflowRuns.status,
      projectId: projects.id,
      projectName: projects.name,
      readAt: inboxItemStates.readAt,
      doneAt: inboxItemStates.doneAt,
      role: projectMembers.role,
      escalated: escalatedSql({ idCol: source.idCol, userId: source.userId, toMe: false }),
    })
    .from(source.table)
    .innerJoin(workflowRuns, eq(workflowRuns.id, source.runCol))
    .innerJoin(projects, eq(projects.id, workflowRuns.projectId))
    .innerJoin(projectMembers, and(eq(projectMembers.projectId, workflowRuns.projectId), eq(projectMembers.userId, source.userId)))
    .leftJoin(inboxItemStates, and(eq(inboxItemStates.userId, source.userId), eq(inboxItemStates.itemId, source.idCol)))
    .where(and(source.visible, where))
    .orderBy(desc(source.createdCol), desc(source.idCol))
    .$dynamic();
  return (await (limit ? query.limit(limit) : query)) as Row[];
}

function toItem(kind: InboxItemKind, row: Row): InboxItem {
  const decided = row.status !== "pending" || TERMINAL.includes(row.runStatus as (typeof TERMINAL)[number]);
  const done = decided || row.doneAt !== null;
  const anchor = kind === "gate" ? `gate-${row.id}` : `question-${row.id}`;
  return {
    id: row.id,
    kind,
    gateKind: row.gateKind,
    summary: row.question ?? (row.gateKind ? GATE_SUMMARY[row.gateKind] : "A question"),
    runId: row.runId,
    runTitle: runTitle(row.request),
    projectId: row.projectId,
    projectName: row.projectName,
    openedAt: row.createdAt.toISOString(),
    read: row.readAt !== null || done,
    done,
    doneReason: decided ? "decided" : row.doneAt ? "marked" : null,
    decision: decided ? inboxDecision({ kind, gateKind: row.gateKind, status: row.status, decision: row.decision, response: row.response, runStatus: row.runStatus }) : null,
    link: `/runs/${row.runId}#${anchor}`,
    deadline: typeof row.deadlineAt === "number" ? new Date(row.deadlineAt).toISOString() : null,
    escalated: Boolean(row.escalated),
    escalatedToYou: !DECIDING_ROLES.includes(row.role),
  };
}

/** How many of this person's items are open, and how many of those they have not read: the header's badge. */
export async function inboxCounts({ user }: { user: SessionUser }): Promise<{ open: number; unread: number }> {
  const db = await getDb();
  const counts = await Promise.all(
    sources(user.id).flatMap((source) =>
      (["open", "unread"] as const).map(async (filter) => {
        const [row] = await db
          .select({ n: count() })
          .from(source.table)
          .innerJoin(workflowRuns, eq(workflowRuns.id, source.runCol))
          .innerJoin(projectMembers, and(eq(projectMembers.projectId, workflowRuns.projectId), eq(projectMembers.userId, user.id)))
          .leftJoin(inboxItemStates, and(eq(inboxItemStates.userId, user.id), eq(inboxItemStates.itemId, source.idCol)))
          .where(and(source.visible, filterCondition(source, filter)));
        return { filter, n: row?.n ?? 0 };
      }),
    ),
  );
  const sum = (filter: "open" | "unread") => counts.filter((c) => c.filter === filter).reduce((total, c) => total + c.n, 0);
  return { open: sum("open"), unread: sum("unread") };
}

/** This person's inbox under a filter, newest first, with the counts for the badge. */
export async function listInbox({
  user,
  filter = "open",
  limit = 100,
}: {
  user: SessionUser;
  filter?: InboxFilter;
  limit?: number;
}): Promise<{ items: InboxItem[]; open: number; unread: number; truncated: boolean }> {
  const perKind = await Promise.all(
    sources(user.id).map(async (source) =>
      (await selectRows({ source, where: filterCondition(source, filter), limit: limit + 1 })).map((row) => toItem(source.kind, row)),
    ),
  );
  const merged = perKind.flat().sort((a, b) => (a.openedAt === b.openedAt ? b.id.localeCompare(a.id) : b.openedAt.localeCompare(a.openedAt)));
  return { items: merged.slice(0, limit), truncated: merged.length > limit, ...(await inboxCounts({ user })) };
}

/**
 * One item, as this person sees it. Anyone who may not see the run gets 404; a member who may not decide (a viewer)
 * gets 403 — the same answers the decision routes give.
 */
export async function getInboxItem({ user, itemId }: { user: SessionUser; itemId: string }): Promise<InboxItem> {
  const notFound = () => new AppError("not_found:api", "No such inbox item: it is neither a gate nor a question you may decide.");
  const source = sources(user.id).find((s) => itemId.startsWith(s.kind === "gate" ? "gate_" : "clr_"));
  if (!source) throw notFound();
  const db = await getDb();
  const [owner] = await db
    .select({ projectId: workflowRuns.projectId, runId: workflowRuns.id })
    .from(source.table)
    .innerJoin(workflowRuns, eq(workflowRuns.id, source.runCol))
    .where(eq(source.idCol, itemId));
  if (!owner) throw notFound();
  await requireProjectRole({ user, projectId: owner.projectId, action: "decide" }).catch(async (error: unknown) => {
    // Not a member: the item does not exist for them (a viewer's 403 stays, unless it escalated to them).
    if (error instanceof AppError && error.type === "not_found") throw notFound();
    const subject = { type: source.kind === "gate" ? ("gate" as const) : ("clarification" as const), id: itemId };
    if (error instanceof AppError && error.type === "forbidden" && (await mayDecideEscalated({ runId: owner.runId, projectId: owner.projectId, subject, userId: user.id }))) return;
    throw error;
  });
  const [row] = await selectRows({ source, where: eq(source.idCol, itemId) });
  if (!row) throw notFound();
  return toItem(source.kind, row);
}

/**
 * Mark an item read, unread (back to new: also not done) or done, for this person only. Done here is this person's
 * "dealt with"; an item decided by anyone is done for everyone whatever is stored.
 */
export async function markInboxItem({
  user,
  itemId,
  action,
}: {
  user: SessionUser;
  itemId: string;
  action: z.output<typeof inboxActionSchema>["action"];
}): Promise<InboxItem> {
  await getInboxItem({ user, itemId });
  const now = new Date();
  const change =
    action === "read"
      ? { readAt: sql`coalesce(${inboxItemStates.readAt}, ${now.getTime()})`, updatedAt: now }
      : action === "done"
        ? { readAt: sql`coalesce(${inboxItemStates.readAt}, ${now.getTime()})`, doneAt: now, updatedAt: now }
        : { readAt: null, doneAt: null, updatedAt: now };
  await write(async (tx) => {
    await tx
      .insert(inboxItemStates)
      .values({
        userId: user.id,
        itemId,
        readAt: action === "unread" ? null : now,
        doneAt: action === "done" ? now : null,
        updatedAt: now,
      })
      .onConflictDoUpdate({ target: [inboxItemStates.userId, inboxItemStates.itemId], set: change });
  });
  return getInboxItem({ user, itemId });
}

/**
 * What the inbox stream compares between two looks: the open items with their read state. A gate that opens, is
 * decided, escalates, or is marked by this person changes it; nothing else does.
 */
export function inboxFingerprint(snapshot: { items: InboxItem[]; open: number; unread: number }): string {
  return JSON.stringify([snapshot.open, snapshot.unread, snapshot.items.map((i) => [i.id, i.read, i.done, i.escalated])]);
}
