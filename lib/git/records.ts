import { z } from "zod";
import { AppError, describeIssues } from "@/lib/errors";
import { slugify } from "@/lib/ids";
import type { StoredRunEvent } from "@/lib/workflow";
import { approvedPlanHash } from "@/lib/workflow/plan-hash";
import { commitFiles, commitMessage, readFileAt, type CommitResult } from "./commit-files";
import { git } from "./run";

export const AUTONOMOUS_DIR = ".autonomous";
export const runDir = (runId: string) => `${AUTONOMOUS_DIR}/runs/${runId}`;

// ---------------------------------------------------------------------------------------------------------------------
// The plan: .autonomous/specs/NNN-<slug>.md

export type SpecTask = { id: string; title: string; dependsOn?: string[]; acceptanceCriteria?: string[] };

const q = (v: string | number | boolean) => JSON.stringify(v);

/** Front matter (JSON-quoted scalars, which are valid YAML) + the request + the Mermaid block + the task list. */
export function renderSpec({
  runId,
  title,
  version,
  status,
  request,
  mermaid,
  tasks,
  summary,
  createdAt,
  planHash,
}: {
  runId: string;
  title: string;
  version: number;
  status: "draft" | "approved" | "edited" | "rejected";
  request: string;
  mermaid: string;
  tasks: SpecTask[];
  summary?: string;
  createdAt: Date;
  /** This version's plan hash (lib/workflow/plan-hash.ts): the one an approval of it records and the validator checks. */
  planHash?: string;
}): string {
  const taskLines = tasks.flatMap((t, i) => [
    `${i + 1}. **${t.id} — ${t.title}**${t.dependsOn?.length ? ` (depends on: ${t.dependsOn.join(", ")})` : ""}`,
    ...(t.acceptanceCriteria ?? []).map((c) => `   - ${c}`),
  ]);
  return [
    "---",
    `run: ${q(runId)}`,
    `title: ${q(title)}`,
    `version: ${version}`,
    `status: ${q(status)}`,
    `createdAt: ${q(createdAt.toISOString())}`,
    `tasks: ${tasks.length}`,
    ...(planHash ? [`planHash: ${q(planHash)}`] : []),
    "---",
    "",
    `# ${title}`,
    "",
    "## Request",
    "",
    request.trim(),
    "",
    ...(summary ? ["## Summary", "", summary.trim(), ""] : []),
    "## Plan",
    "",
    "```mermaid",
    mermaid.trim(),
    "```",
    "",
    "## Tasks",
    "",
    ...taskLines,
    "",
  ].join("\n");
}

/** Parse a spec file back: its front matter and its Mermaid block. */
export function parseSpec(text: string): { frontMatter: Record<string, unknown>; mermaid: string | null } {
  const fm = /^---\n([\s\S]*?)\n---\n/.exec(text);
  const frontMatter: Record<string, unknown> = {};
  for (const line of fm?.[1]?.split("\n") ?? []) {
    const m = /^([A-Za-z][\w-]*):\s*(.*)$/.exec(line);
    if (!m) continue;
    try {
      frontMatter[m[1]!] = JSON.parse(m[2]!);
    } catch {
      frontMatter[m[1]!] = m[2];
    }
  }
  const mermaid = /```mermaid\n([\s\S]*?)\n```/.exec(text)?.[1] ?? null;
  return { frontMatter, mermaid };
}

/** Where this run's spec lives: its existing file, or the next free NNN (across the branch, which includes the base). */
export async function specPathFor({ repoPath, branch, runId, title }: { repoPath: string; branch: string; runId: string; title: string }) {
  const mine = await git(repoPath, ["grep", "-l", "-F", `run: ${q(runId)}`, branch, "--", `${AUTONOMOUS_DIR}/specs/`], { allowFailure: true });
  const found = mine.stdout.split("\n").find(Boolean);
  if (found) return found.slice(found.indexOf(":") + 1);
  const listing = await git(repoPath, ["ls-tree", "--name-only", `${branch}:${AUTONOMOUS_DIR}/specs`], { allowFailure: true });
  const numbers = listing.stdout
    .split("\n")
    .map((n) => /^(\d{3,})-/.exec(n)?.[1])
    .filter((n): n is string => !!n)
    .map(Number);
  const next = (numbers.length ? Math.max(...numbers) : 0) + 1;
  return `${AUTONOMOUS_DIR}/specs/${String(next).padStart(3, "0")}-${slugify(title, 40)}.md`;
}

/** Commit a version of the plan (first plan, an edit, or a re-plan). Each version is its own commit of the same file. */
export async function commitSpec(input: {
  repoPath: string;
  branch: string;
  runId: string;
  title: string;
  version: number;
  status?: "draft" | "approved" | "edited" | "rejected";
  request: string;
  mermaid: string;
  tasks: SpecTask[];
  summary?: string;
  createdAt?: Date;
  planHash?: string;
}): Promise<CommitResult & { path: string }> {
  const file = await specPathFor(input);
  const content = renderSpec({ ...input, status: input.status ?? "draft", createdAt: input.createdAt ?? new Date() });
  const result = await commitFiles({
    repoPath: input.repoPath,
    branch: input.branch,
    files: { [file]: content },
    message: commitMessage({ subject: `Plan v${input.version}: ${input.title} (run ${input.runId})`, runId: input.runId, kind: "spec" }),
  });
  return { ...result, path: file };
}

// ---------------------------------------------------------------------------------------------------------------------
// The run's record: .autonomous/runs/<run-id>/{context.json, validation-report.md, events.jsonl}

const isoOrMs = z.union([z.string().datetime({ offset: true }), z.number().int().nonnegative()]);

export const runContextSchema = z.object({
  schemaVersion: z.literal(1),
  runId: z.string().regex(/^run_[a-z0-9]+$/),
  projectId: z.string().min(1),
  userId: z.string().min(1),
  request: z.string().min(1),
  status: z.string().min(1),
  branch: z.string().min(1),
  baseBranch: z.string().min(1),
  createdAt: isoOrMs,
  completedAt: isoOrMs.nullable(),
  config: z.record(z.string(), z.unknown()),
  clarifications: z.array(
    z.object({
      id: z.string().min(1),
      stage: z.string().min(1),
      question: z.string(),
      context: z.string().nullable(),
      options: z.array(z.string()).nullable(),
      responseType: z.string().min(1),
      status: z.string().min(1),
      response: z.unknown().nullable(),
      answeredBy: z.string().nullable(),
      answeredAt: isoOrMs.nullable(),
      attemptNumber: z.number().int().min(1),
      createdAt: isoOrMs,
    }),
  ),
  artifacts: z.array(
    z.object({
      stage: z.string().min(1),
      type: z.string().min(1),
      path: z.string().min(1),
      version: z.number().int().min(1),
      commitSha: z.string().regex(/^[0-9a-f]{40}$/).nullable(),
    }),
  ),
  /** The hash of the plan in force (the last approved; lib/workflow/plan-hash.ts), null before there is a plan. */
  approvedPlanHash: z.string().regex(/^[0-9a-f]{64}$/).nullable().optional(),
  decisions: z.array(
    z.object({
      at: isoOrMs,
      kind: z.enum(["approval", "rejection", "fix_decision", "clarification", "merge", "other"]),
      by: z.string().nullable(),
      decision: z.string().min(1),
      gateId: z.string().nullable(),
      notes: z.string().nullable(),
    }),
  ),
  /**
   * The run's rows the event log does not carry, as the database held them (timestamps as epoch ms): its gates with
   * their decisions, its model calls (tokens, cost, latency) and its artifact index — so a rebuild from Git restores
   * them exactly. Absent in records written before they were kept.
   */
  rows: z
    .object({
      gates: z.array(z.record(z.string(), z.unknown())),
      modelCalls: z.array(z.record(z.string(), z.unknown())),
      artifacts: z.array(z.record(z.string(), z.unknown())),
    })
    .optional(),
});

export type RunContext = z.infer<typeof runContextSchema>;
export type RunRows = NonNullable<RunContext["rows"]>;
export type ContextClarification = RunContext["clarifications"][number];

/** Parse context.json text against the schema; a bad file names what is wrong. */
export function parseRunContext(text: string): RunContext {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new AppError("bad_request:git", `context.json is not JSON: ${(error as Error).message}`);
  }
  const parsed = runContextSchema.safeParse(json);
  if (!parsed.success) throw new AppError("bad_request:git", `context.json is invalid: ${describeIssues(parsed.error.issues)}`);
  return parsed.data;
}

/** A clarification_requests row as context.json stores it (timestamps as epoch ms). */
export function clarificationFromRow(row: {
  id: string;
  stage: string;
  question: string;
  context: string | null;
  options: string[] | null;
  responseType: string;
  status: string;
  response: unknown;
  answeredBy: string | null;
  answeredAt: Date | null;
  attemptNumber: number;
  createdAt: Date;
}): ContextClarification {
  return {
    id: row.id,
    stage: row.stage,
    question: row.question,
    context: row.context,
    options: row.options,
    responseType: row.responseType,
    status: row.status,
    response: row.response ?? null,
    answeredBy: row.answeredBy,
    answeredAt: row.answeredAt ? row.answeredAt.getTime() : null,
    attemptNumber: row.attemptNumber,
    createdAt: row.createdAt.getTime(),
  };
}

const ARTIFACT_STAGE: Record<string, string> = { spec: "planning", plan: "planning", checkpoint: "implementation", report: "validation" };

/**
 * Build context.json from the run's event log (the source of truth) plus what events do not carry: the clarifications'
 * full rows (answers) from the database.
 */
export function buildRunContext({
  events,
  clarifications = [],
  baseBranch,
  rows,
}: {
  events: StoredRunEvent[];
  clarifications?: ContextClarification[];
  baseBranch: string;
  /** The run's gates, model calls and artifact rows (see runContextSchema.rows). */
  rows?: RunRows;
}): RunContext {
  const created = events.find((e) => e.type === "RUN_CREATED");
  if (!created || created.type !== "RUN_CREATED") throw new AppError("bad_request:git", "The event log has no RUN_CREATED.");
  const p = created.payload;
  const artifacts: RunContext["artifacts"] = [];
  const decisions: RunContext["decisions"] = [];
  let status = "queued";
  let completedAt: number | null = null;
  const byClarification = new Map(clarifications.map((c) => [c.id, c]));
  const derived: ContextClarification[] = [];
  for (const e of events) {
    switch (e.type) {
      case "PLAN_CREATED":
      case "PLAN_EDITED":
        if (e.payload.path) artifacts.push({ stage: "planning", type: "spec", path: e.payload.path, version: e.payload.version, commitSha: e.payload.commitSha ?? null });
        if (e.type === "PLAN_EDITED") decisions.push({ at: e.timestamp, kind: "other", by: e.payload.by, decision: `plan edited (v${e.payload.version})`, gateId: null, notes: null });
        break;
      case "ARTIFACT_CREATED":
        artifacts.push({ stage: ARTIFACT_STAGE[e.payload.type] ?? "implementation", type: e.payload.type, path: e.payload.path, version: e.payload.version ?? 1, commitSha: e.payload.commitSha ?? null });
        break;
      case "TASK_COMPLETED":
        artifacts.push({ stage: "implementation", type: "checkpoint", path: `task:${e.payload.taskId}`, version: 1, commitSha: e.payload.commitSha ?? null });
        break;
      case "APPROVAL_GRANTED":
        decisions.push({ at: e.timestamp, kind: "approval", by: e.payload.by, decision: e.payload.editedPlan ? "approved with edits" : "approved", gateId: e.payload.gateId, notes: e.payload.notes ?? null });
        break;
      case "APPROVAL_REJECTED":
        decisions.push({ at: e.timestamp, kind: "rejection", by: e.payload.by, decision: "rejected", gateId: e.payload.gateId, notes: e.payload.feedback });
        break;
      case "PLAN_QUESTION_ASKED":
        decisions.push({ at: e.timestamp, kind: "other", by: e.payload.by, decision: "asked the planner", gateId: e.payload.gateId, notes: e.payload.question });
        break;
      case "FIX_DECISION_MADE":
        decisions.push({ at: e.timestamp, kind: "fix_decision", by: e.payload.by, decision: e.payload.decision, gateId: e.payload.gateId, notes: null });
        break;
      case "CLARIFICATION_REQUESTED":
        if (!byClarification.has(e.payload.clarificationId)) {
          derived.push({ id: e.payload.clarificationId, stage: e.payload.stage, question: e.payload.question, context: null, options: null, responseType: "text", status: "pending", response: null, answeredBy: null, answeredAt: null, attemptNumber: 1, createdAt: e.timestamp });
        }
        break;
      case "CLARIFICATION_ANSWERED": {
        const d = derived.find((c) => c.id === e.payload.clarificationId);
        if (d) Object.assign(d, { status: "answered", answeredBy: e.payload.by, answeredAt: e.timestamp });
        decisions.push({ at: e.timestamp, kind: "clarification", by: e.payload.by, decision: "answered", gateId: null, notes: e.payload.clarificationId });
        break;
      }
      case "CLARIFICATION_IGNORED": {
        const d = derived.find((c) => c.id === e.payload.clarificationId);
        if (d) Object.assign(d, { status: "ignored", answeredBy: e.payload.by, answeredAt: e.timestamp });
        decisions.push({ at: e.timestamp, kind: "clarification", by: e.payload.by, decision: e.payload.then === "planning" ? "skipped (sent back to planning)" : "skipped (best judgement)", gateId: null, notes: e.payload.clarificationId });
        break;
      }
      case "PR_MERGED":
        decisions.push({ at: e.timestamp, kind: "merge", by: e.payload.by ?? null, decision: `merged${e.payload.method ? ` (${e.payload.method})` : ""}`, gateId: null, notes: e.payload.sha ?? null });
        break;
      case "MERGE_DECIDED":
        decisions.push({ at: e.timestamp, kind: "merge", by: e.payload.by, decision: "merge decided", gateId: null, notes: e.payload.notes ?? null });
        break;
      case "MERGE_FAILED":
        decisions.push({ at: e.timestamp, kind: "merge", by: null, decision: "merge failed", gateId: null, notes: e.payload.reason });
        break;
      case "RUN_COMPLETED":
        status = "completed";
        completedAt = e.timestamp;
        break;
      case "RUN_FAILED":
        status = "failed";
        completedAt = e.timestamp;
        break;
      case "RUN_CANCELLED":
        status = "cancelled";
        completedAt = e.timestamp;
        break;
      default:
        if (status === "queued" && e.type === "RUN_STARTED") status = "running";
    }
  }
  return runContextSchema.parse({
    schemaVersion: 1,
    runId: created.runId,
    projectId: p.projectId,
    userId: p.userId,
    request: p.request,
    status,
    branch: p.branch ?? "",
    baseBranch,
    createdAt: created.timestamp,
    completedAt,
    config: p.config,
    clarifications: [...clarifications, ...derived],
    artifacts,
    approvedPlanHash: approvedPlanHash(events),
    decisions,
    ...(rows ? { rows } : {}),
  });
}

/** One stored event per line: id, sequence, type, payload, timestamp (epoch ms). */
export function serializeEvents(events: StoredRunEvent[]): string {
  return [...events]
    .sort((a, b) => a.sequence - b.sequence)
    .map((e) => JSON.stringify({ id: e.id, sequence: e.sequence, type: e.type, payload: e.payload, timestamp: e.timestamp }))
    .join("\n")
    .concat("\n");
}

export function parseEvents(runId: string, text: string): StoredRunEvent[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((line, i) => {
      const e = JSON.parse(line) as { id: string; sequence: number; type: string; payload: unknown; timestamp: number };
      if (typeof e.sequence !== "number" || typeof e.type !== "string" || typeof e.timestamp !== "number") {
        throw new AppError("bad_request:git", `events.jsonl line ${i + 1} of ${runId} is not a stored event.`);
      }
      return { ...e, runId } as StoredRunEvent;
    });
}

/**
 * Commit the run's records in one commit: context.json (validated), validation-report.md and events.jsonl. Call it at
 * the end of a run (completed, failed or cancelled), and before a pause so a waiting run can be rebuilt too.
 */
export async function commitRunRecords({
  repoPath,
  branch,
  context,
  validationReport,
  events,
}: {
  repoPath: string;
  branch: string;
  context: RunContext;
  validationReport?: string | null;
  events: StoredRunEvent[];
}): Promise<CommitResult> {
  const valid = runContextSchema.safeParse(context);
  if (!valid.success) throw new AppError("bad_request:git", `context.json is invalid: ${describeIssues(valid.error.issues)}`);
  const dir = runDir(context.runId);
  const files: Record<string, string> = {
    [`${dir}/context.json`]: `${JSON.stringify(valid.data, null, 2)}\n`,
    [`${dir}/events.jsonl`]: serializeEvents(events),
  };
  if (validationReport != null) files[`${dir}/validation-report.md`] = validationReport.endsWith("\n") ? validationReport : `${validationReport}\n`;
  return commitFiles({
    repoPath,
    branch,
    files,
    message: commitMessage({ subject: `Run record: ${context.status} (run ${context.runId})`, runId: context.runId, kind: "records" }),
  });
}

/** Read a run's context.json from a ref (validated), or null when absent. */
export async function readRunContext({ repoPath, ref, runId }: { repoPath: string; ref: string; runId: string }): Promise<RunContext | null> {
  const text = await readFileAt({ repoPath, ref, path: `${runDir(runId)}/context.json` });
  return text === null ? null : parseRunContext(text);
}
