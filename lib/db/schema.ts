import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex, real } from "drizzle-orm/sqlite-core";
// Relative, not "@/": drizzle-kit loads this file on its own.
import { TYPE_INDEXED_EVENTS } from "../workflow/events";

/*
 * Gatehouse's tables (SQLite dialect; libSQL file or server). Timestamps are epoch milliseconds.
 * workflow_runs is a projection of workflow_events computed by lib/workflow's reducer; never update it by hand.
 */

const now = sql`(cast(unixepoch('subsecond') * 1000 as integer))`;
const createdAt = () => integer("created_at", { mode: "timestamp_ms" }).notNull().default(now);

// ---------------------------------------------------------------------------------------------------------------------
// Users (Auth.js-compatible shape, so the Drizzle adapter can use them)

export const users = sqliteTable("users", {
  id: text("id").primaryKey(),
  name: text("name"),
  email: text("email").unique(),
  emailVerified: integer("email_verified", { mode: "timestamp_ms" }),
  image: text("image"),
  createdAt: createdAt(),
});

export const accounts = sqliteTable(
  "accounts",
  {
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    provider: text("provider").notNull(),
    providerAccountId: text("provider_account_id").notNull(),
    refresh_token: text("refresh_token"),
    access_token: text("access_token"),
    expires_at: integer("expires_at"),
    token_type: text("token_type"),
    scope: text("scope"),
    id_token: text("id_token"),
    session_state: text("session_state"),
  },
  (t) => [primaryKey({ columns: [t.provider, t.providerAccountId] })],
);

export const sessions = sqliteTable("sessions", {
  sessionToken: text("session_token").primaryKey(),
  userId: text("user_id")
    .notNull()
    .references(() => users.id, { onDelete: "cascade" }),
  expires: integer("expires", { mode: "timestamp_ms" }).notNull(),
});

export const verificationTokens = sqliteTable(
  "verification_tokens",
  {
    identifier: text("identifier").notNull(),
    token: text("token").notNull(),
    expires: integer("expires", { mode: "timestamp_ms" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.identifier, t.token] })],
);

/** API tokens for scripts: only a SHA-256 of the token is stored; the token itself is shown once. */
export const apiTokens = sqliteTable(
  "api_tokens",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    tokenHash: text("token_hash").notNull().unique(),
    prefix: text("prefix").notNull(),
    createdAt: createdAt(),
    lastUsedAt: integer("last_used_at", { mode: "timestamp_ms" }),
    revokedAt: integer("revoked_at", { mode: "timestamp_ms" }),
  },
  (t) => [index("api_tokens_user_idx").on(t.userId)],
);

// ---------------------------------------------------------------------------------------------------------------------
// Projects

/**
 * A project's repository. A local path is stored as its realpath; `repositoryId` is GitHub's numeric id, set by the
 * server once the GitHub App has confirmed the repository (never taken from the caller).
 */
export type RepositoryBinding =
  | { type: "local"; path: string }
  | { type: "github"; owner: string; repo: string; installationId?: number; repositoryId?: number };

export const projects = sqliteTable(
  "projects",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    ownerId: text("owner_id")
      .notNull()
      .references(() => users.id),
    repository: text("repository", { mode: "json" }).$type<RepositoryBinding>().notNull(),
    /** Partial RunConfig applied under each run's own config. */
    defaultConfig: text("default_config", { mode: "json" }).$type<Record<string, unknown>>().notNull().default({}),
    /**
     * One project per repository: "local:<realpath>", "github:<repository id>", or "github:<owner>/<repo>" (lowercased)
     * while GitHub's id is unknown. Unique, so two concurrent bindings of one repository cannot both win.
     */
    repositoryKey: text("repository_key"),
    /** Cached copy of .autonomous/memory.md (Git is the source of truth). */
    memory: text("memory"),
    createdAt: createdAt(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull().default(now),
  },
  (t) => [index("projects_owner_idx").on(t.ownerId), uniqueIndex("projects_repository_key_uq").on(t.repositoryKey)],
);

export type ProjectRole = "owner" | "approver" | "viewer";

export const projectMembers = sqliteTable(
  "project_members",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text("role").$type<ProjectRole>().notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.userId] }), index("project_members_user_idx").on(t.userId)],
);

export type InvitationStatus = "pending" | "accepted" | "declined" | "revoked";

/**
 * Membership offers: an owner invites an email with a role; the person with that email (now or after their first
 * sign-in) accepts or declines. At most one pending invitation per project and email.
 */
export const projectInvitations = sqliteTable(
  "project_invitations",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** Lowercased. */
    email: text("email").notNull(),
    role: text("role").$type<ProjectRole>().notNull(),
    status: text("status").$type<InvitationStatus>().notNull().default("pending"),
    invitedBy: text("invited_by")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: createdAt(),
    decidedAt: integer("decided_at", { mode: "timestamp_ms" }),
  },
  (t) => [
    uniqueIndex("project_invitations_pending_uq").on(t.projectId, t.email).where(sql`${t.status} = 'pending'`),
    index("project_invitations_email_idx").on(t.email),
  ],
);

// ---------------------------------------------------------------------------------------------------------------------
// Runs (event-sourced)

export const workflowRuns = sqliteTable(
  "workflow_runs",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id),
    userId: text("user_id")
      .notNull()
      .references(() => users.id),
    config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    status: text("status").notNull(),
    currentStage: text("current_stage"),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    startedAt: integer("started_at", { mode: "timestamp_ms" }),
    pausedAt: integer("paused_at", { mode: "timestamp_ms" }),
    resumedAt: integer("resumed_at", { mode: "timestamp_ms" }),
    completedAt: integer("completed_at", { mode: "timestamp_ms" }),
    originalRequest: text("original_request").notNull(),
    clarificationCount: integer("clarification_count").notNull().default(0),
    branch: text("branch"),
    /** The rest of the reducer's state (pending gate, pause reason, plan version, PR …). */
    state: text("state", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    lastSequence: integer("last_sequence").notNull().default(0),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
  },
  (t) => [
    index("workflow_runs_project_created_idx").on(t.projectId, t.createdAt, t.id),
    index("workflow_runs_user_created_idx").on(t.userId, t.createdAt, t.id),
    index("workflow_runs_status_idx").on(t.status),
    index("workflow_runs_created_idx").on(t.createdAt, t.id),
  ],
);

/**
 * The event types queries look up by type: the only rows of the partial index workflow_events_run_type_idx. Named
 * with the event types (lib/workflow/events.ts); a query by type goes through eventTypeIn (lib/db/event-store.ts).
 */
export { TYPE_INDEXED_EVENTS };
export type TypeIndexedEvent = (typeof TYPE_INDEXED_EVENTS)[number];
/**
 * The partial type index's condition, as SQL text (the same text in the index and in every query that uses it). A chain
 * of equalities, not `IN (…)`: every append evaluates it, and SQLite builds an ephemeral table for an IN list each time
 * a statement runs (about 7 µs an insert, measured), where a chain of comparisons costs next to nothing.
 */
export const TYPE_INDEX_CONDITION = `(${TYPE_INDEXED_EVENTS.map((t) => `"type" = '${t}'`).join(" OR ")})`;
/**
 * The partial step-key index's condition: events a durable step wrote (the API's own appends carry no step key). On a
 * column of its own, not `json_extract(payload, …)`: every append evaluates it, and parsing the payload was a cost.
 */
export const STEP_KEY_INDEX_CONDITION = `"step_key" IS NOT NULL`;

/**
 * The run event log. Keyed by (run, sequence), the order every read uses; the event's own `id` is an identifier for
 * clients, never looked up, so it has no index of its own (each index is one more page written by every append).
 * The table is WITHOUT ROWID (migration 0011; Drizzle cannot say so): the key is the table, one b-tree per append
 * instead of two. Statistics written by that migration keep SQLite choosing the partial indexes below.
 */
export const workflowEvents = sqliteTable(
  "workflow_events",
  {
    id: text("id").notNull(),
    workflowRunId: text("workflow_run_id")
      .notNull()
      .references(() => workflowRuns.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    payload: text("payload", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    timestamp: integer("timestamp", { mode: "timestamp_ms" }).notNull(),
    sequence: integer("sequence").notNull(),
    /** The durable step that wrote the event (also in the payload, as `stepKey`, for clients), else null. */
    stepKey: text("step_key"),
  },
  (t) => [
    primaryKey({ name: "workflow_events_run_sequence_pk", columns: [t.workflowRunId, t.sequence] }),
    // A durable step's append first looks for the events it already wrote (findStepEvents): without this index that is
    // a scan of the run's whole log on every step. Events without a step key are left out of it; the sequence gives the
    // lookup its order, so SQLite never prefers walking the run's whole log in order instead.
    index("workflow_events_run_step_key_idx").on(t.workflowRunId, t.stepKey, t.sequence).where(sql.raw(STEP_KEY_INDEX_CONDITION)),
    // A run's events of one type: the inbox (read every second by each stream) looks up a gate's deadline and whether it
    // escalated to this person, and the deadline checks read DECISION_ESCALATED, without a scan of the run's whole log.
    index("workflow_events_run_type_idx").on(t.workflowRunId, t.type).where(sql.raw(TYPE_INDEX_CONDITION)),
  ],
);

export const clarificationRequests = sqliteTable(
  "clarification_requests",
  {
    id: text("id").primaryKey(),
    workflowRunId: text("workflow_run_id")
      .notNull()
      .references(() => workflowRuns.id, { onDelete: "cascade" }),
    stage: text("stage").notNull(),
    question: text("question").notNull(),
    context: text("context"),
    options: text("options", { mode: "json" }).$type<string[]>(),
    responseType: text("response_type").notNull(),
    status: text("status").notNull().default("pending"),
    response: text("response", { mode: "json" }).$type<unknown>(),
    answeredBy: text("answered_by"),
    answeredAt: integer("answered_at", { mode: "timestamp_ms" }),
    attemptNumber: integer("attempt_number").notNull().default(1),
    createdAt: createdAt(),
  },
  (t) => [index("clarification_requests_run_idx").on(t.workflowRunId)],
);

export type GateKind = "plan" | "implementation" | "fix" | "escalation" | "budget" | "timeout" | "conflict" | "policy";

export const gates = sqliteTable(
  "gates",
  {
    id: text("id").primaryKey(),
    workflowRunId: text("workflow_run_id")
      .notNull()
      .references(() => workflowRuns.id, { onDelete: "cascade" }),
    gateNumber: integer("gate_number").notNull(),
    kind: text("kind").$type<GateKind>().notNull(),
    artifactVersion: integer("artifact_version"),
    status: text("status").notNull().default("pending"),
    /** What the decider sees: the plan, the diff summary, the escalated question … */
    context: text("context", { mode: "json" }).$type<Record<string, unknown>>(),
    decision: text("decision"),
    decidedBy: text("decided_by"),
    decidedAt: integer("decided_at", { mode: "timestamp_ms" }),
    notes: text("notes"),
    payload: text("payload", { mode: "json" }).$type<Record<string, unknown>>(),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("gates_run_number_uq").on(t.workflowRunId, t.gateNumber)],
);

/**
 * "The workflow has taken this decision": written by the workflow's check step when it reads a stored decision (a gate,
 * a clarification, a resume), and read by the re-announcer (inngest/functions/decision-reannounce.ts),
 * which repeats a decision's announcement until it is here. Inngest's waits do not look back at earlier events, so an
 * announcement that lands between the workflow's check and its wait would otherwise only be seen at the next recheck.
 */
export const decisionAcks = sqliteTable(
  "decision_acks",
  {
    workflowRunId: text("workflow_run_id")
      .notNull()
      .references(() => workflowRuns.id, { onDelete: "cascade" }),
    /** gate:<id>, clarification:<id> or resume:<sequence of the RUN_RESUMED event> (lib/runs/gates/acks.ts). */
    decisionKey: text("decision_key").notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.workflowRunId, t.decisionKey] })],
);

/**
 * The implementer's conversation, outside the durable steps' results (Inngest caps a step's output at 4 MB and a run's
 * state at 32 MB): each turn stores the messages it added as one chunk pointing at the chunk before it, and the step
 * returns only the id of its newest chunk. A chunk's id is new for every execution of a step, so a turn that runs again
 * after a crash writes a fresh chunk and the one its lost execution left behind is never referenced.
 */
export const implementerChunks = sqliteTable(
  "implementer_chunks",
  {
    id: text("id").primaryKey(),
    workflowRunId: text("workflow_run_id")
      .notNull()
      .references(() => workflowRuns.id, { onDelete: "cascade" }),
    prevId: text("prev_id"),
    messages: text("messages", { mode: "json" }).$type<unknown[]>().notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("implementer_chunks_run_idx").on(t.workflowRunId)],
);

export const artifacts = sqliteTable(
  "artifacts",
  {
    id: text("id").primaryKey(),
    workflowRunId: text("workflow_run_id")
      .notNull()
      .references(() => workflowRuns.id, { onDelete: "cascade" }),
    stage: text("stage").notNull(),
    type: text("type").notNull(),
    path: text("path").notNull(),
    commitSha: text("commit_sha"),
    version: integer("version").notNull().default(1),
    contentHash: text("content_hash"),
    createdAt: createdAt(),
  },
  (t) => [index("artifacts_run_idx").on(t.workflowRunId)],
);

export const modelCalls = sqliteTable(
  "model_calls",
  {
    id: text("id").primaryKey(),
    workflowRunId: text("workflow_run_id").references(() => workflowRuns.id, { onDelete: "cascade" }),
    stage: text("stage").notNull(),
    model: text("model").notNull(),
    tokensIn: integer("tokens_in").notNull().default(0),
    tokensOut: integer("tokens_out").notNull().default(0),
    costUsd: real("cost_usd").notNull().default(0),
    latencyMs: integer("latency_ms").notNull().default(0),
    status: text("status").notNull(),
    attempt: integer("attempt").notNull().default(1),
    error: text("error"),
    /** Deterministic key of the durable step that made the call, so a replayed step never records twice. */
    stepKey: text("step_key"),
    createdAt: createdAt(),
  },
  (t) => [index("model_calls_run_idx").on(t.workflowRunId), uniqueIndex("model_calls_step_key_uq").on(t.stepKey)],
);

// ---------------------------------------------------------------------------------------------------------------------
// GitHub App

/**
 * Webhook deliveries by X-GitHub-Delivery id: a repeated delivery finds its row and has no second effect. The payload
 * is kept so the Inngest function that does the work reads it from here (events stay small).
 */
export const githubDeliveries = sqliteTable(
  "github_deliveries",
  {
    id: text("id").primaryKey(),
    event: text("event").notNull(),
    action: text("action"),
    payload: text("payload", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** What processing did: e.g. "pr_merged run_…", "ignored: not a project member". */
    outcome: text("outcome"),
    receivedAt: createdAt(),
    processedAt: integer("processed_at", { mode: "timestamp_ms" }),
  },
  (t) => [index("github_deliveries_received_idx").on(t.receivedAt)],
);

/** Repositories the GitHub App is installed on (from installation webhooks), offered when connecting a project. */
export const githubRepositories = sqliteTable(
  "github_repositories",
  {
    /** GitHub's numeric repository id. */
    id: integer("id").primaryKey(),
    installationId: integer("installation_id").notNull(),
    owner: text("owner").notNull(),
    name: text("name").notNull(),
    fullName: text("full_name").notNull(),
    private: integer("private", { mode: "boolean" }).notNull().default(false),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull().default(now),
  },
  (t) => [index("github_repositories_installation_idx").on(t.installationId), index("github_repositories_full_name_idx").on(t.fullName)],
);

// ---------------------------------------------------------------------------------------------------------------------
// The inbox: one row per person and item they acted on

/**
 * What one person has done with one inbox item (a gate or a clarification question). Which items are open is computed
 * from the runs' own rows (gates, clarification_requests); only this per-person state is stored, so it survives a
 * restart. `itemId` is the gate's or the question's id (`gate_…` / `clr_…`); no foreign key, as it points at either.
 */
export const inboxItemStates = sqliteTable(
  "inbox_item_states",
  {
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    itemId: text("item_id").notNull(),
    readAt: integer("read_at", { mode: "timestamp_ms" }),
    doneAt: integer("done_at", { mode: "timestamp_ms" }),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull().default(now),
  },
  (t) => [primaryKey({ columns: [t.userId, t.itemId] })],
);

// ---------------------------------------------------------------------------------------------------------------------
// Notifications out (lib/notifications)

export type NotificationKind = "webhook" | "email" | "slack" | "telegram";
export type NoticeLevel = "decisions" | "run_ends" | "everything";

/**
 * Where a decision's notice goes. A project channel (project_id set) is configured by the project's owners: a webhook,
 * an SMTP server and address list, a Slack channel, a Telegram chat. A personal channel (user_id set) is a person's own
 * address: their email or Telegram chat, reached through the project's SMTP server or bot of the same kind. `config`
 * holds only what may be shown back; the channel's secret (webhook signing secret, SMTP password, Slack or Telegram bot
 * token) is `secret`, AES-256-GCM encrypted (lib/notifications/crypto.ts) and never returned by the API.
 */
export const notificationChannels = sqliteTable(
  "notification_channels",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").references(() => projects.id, { onDelete: "cascade" }),
    userId: text("user_id").references(() => users.id, { onDelete: "cascade" }),
    kind: text("kind").$type<NotificationKind>().notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** `v1.<iv>.<tag>.<ciphertext>` (base64url); null when the kind needs none (personal channels). */
    secret: text("secret"),
    /** What this channel (or person) receives: decisions only, also run ends, or everything (pauses too). */
    notices: text("notices").$type<NoticeLevel>().notNull().default("decisions"),
    createdAt: createdAt(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull().default(now),
  },
  // NULLs are distinct in a unique index: one channel of a kind per project, and one per person.
  (t) => [uniqueIndex("notification_channels_project_kind_uq").on(t.projectId, t.kind), uniqueIndex("notification_channels_user_kind_uq").on(t.userId, t.kind)],
);

/**
 * A project's own MCP servers (issue #38), configured by its owners: the implementer of each run of the project gets
 * their tools (allowed by default, unlike a repository's). `config` holds what may be shown back (command, args, env,
 * or the URL and the names of its headers); the header values are `secretHeaders`, a JSON object AES-256-GCM encrypted
 * (lib/auth/secret-box.ts, as channel secrets) and never returned by the API.
 */
export const projectMcpServers = sqliteTable(
  "project_mcp_servers",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** `v1.<iv>.<tag>.<ciphertext>` of the headers' JSON; null when the server has no headers. */
    secretHeaders: text("secret_headers"),
    createdAt: createdAt(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull().default(now),
  },
  (t) => [uniqueIndex("project_mcp_servers_project_name_uq").on(t.projectId, t.name)],
);

export type DeliveryStatus = "pending" | "delivered" | "failed";

/**
 * The delivery log: one row per channel (and per person, for personal channels) a decision notice was sent to. The
 * message is stored (it holds no secret) so a failed delivery can be sent again from the UI.
 */
export const notificationDeliveries = sqliteTable(
  "notification_deliveries",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    workflowRunId: text("workflow_run_id").references(() => workflowRuns.id, { onDelete: "cascade" }),
    channelId: text("channel_id").references(() => notificationChannels.id, { onDelete: "set null" }),
    kind: text("kind").$type<NotificationKind>().notNull(),
    /** Whose personal channel this went to; null for a project channel. */
    recipientUserId: text("recipient_user_id").references(() => users.id, { onDelete: "set null" }),
    /** What it went to, fit to show: "hooks.example.com", "#approvals", "2 addresses", "chat 12345". */
    target: text("target").notNull(),
    /** A decision's gate or question, or the run itself for a run notice (completed, failed, paused). */
    subjectType: text("subject_type").$type<"gate" | "clarification" | "run">().notNull(),
    subjectId: text("subject_id").notNull(),
    reason: text("reason").notNull(),
    message: text("message", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    status: text("status").$type<DeliveryStatus>().notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    lastError: text("last_error"),
    /** The Standard Webhooks message id (webhook-id), the same on every retry of one delivery. */
    messageId: text("message_id").notNull(),
    createdAt: createdAt(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull().default(now),
    deliveredAt: integer("delivered_at", { mode: "timestamp_ms" }),
  },
  (t) => [index("notification_deliveries_project_idx").on(t.projectId, t.createdAt), index("notification_deliveries_run_idx").on(t.workflowRunId)],
);

// ---------------------------------------------------------------------------------------------------------------------
// Chat: Slack and Telegram accounts linked to users, and the decisions made from chat (lib/chat)

export type ChatProvider = "slack" | "telegram";

/** A one-time code from the Settings page, redeemed in chat to link that chat account; only its hash is stored. */
export const chatLinkCodes = sqliteTable("chat_link_codes", {
  codeHash: text("code_hash").primaryKey(),
  userId: text("user_id")
    .notNull()
    .references(() => users.id, { onDelete: "cascade" }),
  expiresAt: integer("expires_at", { mode: "timestamp_ms" }).notNull(),
  createdAt: createdAt(),
});

/** A chat account acting as a user: Slack `<team>:<user>`, Telegram's numeric user id. */
export const chatIdentities = sqliteTable(
  "chat_identities",
  {
    id: text("id").primaryKey(),
    provider: text("provider").$type<ChatProvider>().notNull(),
    externalId: text("external_id").notNull(),
    displayName: text("display_name"),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("chat_identities_provider_external_uq").on(t.provider, t.externalId), index("chat_identities_user_idx").on(t.userId)],
);

/** Every decision applied from chat: who (user and chat account), from where, what, when. */
export const chatDecisions = sqliteTable(
  "chat_decisions",
  {
    id: text("id").primaryKey(),
    provider: text("provider").$type<ChatProvider>().notNull(),
    externalId: text("external_id").notNull(),
    /** Where it was pressed: "slack T1/C2", "telegram chat 42". */
    place: text("place").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    workflowRunId: text("workflow_run_id").references(() => workflowRuns.id, { onDelete: "cascade" }),
    subjectId: text("subject_id").notNull(),
    action: text("action").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("chat_decisions_run_idx").on(t.workflowRunId)],
);
