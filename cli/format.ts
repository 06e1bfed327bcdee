import { STAGES } from "../lib/workflow/config";
import { CLI } from "./errors";
import type { Cost, Project, Run, RunEvent } from "./types";

/* Human output. --json output is the API's own JSON and never goes through here. */

/**
 * What a terminal would act on instead of showing — C0 controls but newline and tab, a carriage return not ending a
 * line, DEL, C1 controls, and the bidirectional overrides that reorder what is shown — as visible escapes (ESC → \x1b).
 * Text from the server (requests, titles, names, messages, diffs) can hold anything; printed raw, an ESC sequence could
 * clear the screen, set the window title or write the clipboard (OSC 52).
 */
const TERMINAL_CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]|\r(?!\n)/g;

export function printable(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`;
  });
}

export function time(iso: string | null | undefined): string {
  if (!iso) return "--:--:--";
  return new Date(iso).toISOString().slice(11, 19);
}

export function money(cost: Cost): string {
  return `$${cost.usd.toFixed(4)} · ${cost.calls} model call${cost.calls === 1 ? "" : "s"} · ${cost.tokensIn + cost.tokensOut} tokens`;
}

/** `[2/4 implementation]`: where a stage sits in plan → implement → validate → deliver. */
export function stageProgress(stage: string): string {
  const index = STAGES.indexOf(stage as (typeof STAGES)[number]);
  return index < 0 ? `[${stage}]` : `[${index + 1}/${STAGES.length} ${stage}]`;
}

/** Fixed-width columns, no borders. */
export function table(rawRows: string[][]): string {
  if (rawRows.length === 0) return "";
  // Escaped before measuring, so that a control character shown as \x1b keeps the columns straight.
  const rows = rawRows.map((r) => r.map(printable));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ").trimEnd()).join("\n");
}

export function projectsTable(projects: Project[]): string {
  if (projects.length === 0) return "No projects yet. Create one in the dashboard or with POST /api/projects.";
  return table([
    ["ID", "NAME", "ROLE", "REPOSITORY"],
    ...projects.map((p) => [p.id, p.name, p.role ?? "", p.repository.type === "local" ? p.repository.path : `github:${p.repository.owner}/${p.repository.repo}`]),
  ]);
}

export function runsTable(runs: Run[]): string {
  if (runs.length === 0) return "No runs match.";
  return table([
    ["ID", "STATUS", "STAGE", "CREATED", "REQUEST"],
    ...runs.map((r) => [r.id, r.status, r.currentStage ?? "", r.createdAt?.slice(0, 16).replace("T", " ") ?? "", oneLine(r.originalRequest, 60)]),
  ]);
}

export function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** What a person can do next about a waiting run, as commands to type. */
export function nextSteps(run: Pick<Run, "id" | "status" | "pendingGate" | "pendingClarification" | "pauseReason">): string | null {
  switch (run.status) {
    case "awaiting_approval":
      return `waiting for your approval: ${CLI} approve ${run.id} · ${CLI} edit ${run.id} · ${CLI} reject ${run.id} --feedback "…"`;
    case "awaiting_clarification":
      return `waiting for your answer: ${CLI} answer ${run.pendingClarification?.clarificationId ?? run.id}`;
    case "awaiting_fix_decision":
      return `validation failed, waiting for your decision: ${CLI} fix ${run.id} retry|accept|cancel`;
    case "paused":
      return `paused${run.pauseReason ? ` (${run.pauseReason.reason}: ${oneLine(run.pauseReason.message, 100)})` : ""}: ${CLI} retry ${run.id} · ${CLI} cancel ${run.id}`;
    default:
      return null;
  }
}

/** One timeline line per event; null for events not worth a line of their own. */
export function eventLine(event: RunEvent): string | null {
  const p = event.payload ?? {};
  const at = `${time(event.timestamp)} #${String(event.sequence).padStart(3)}`;
  const text = describeEvent(event.type, p);
  return text === null ? null : `${at}  ${text}`;
}

function describeEvent(type: string, p: Record<string, unknown>): string | null {
  const s = (v: unknown) => (v === undefined || v === null ? "" : String(v));
  switch (type) {
    case "RUN_CREATED":
      return "run created";
    case "RUN_QUEUED":
      return "queued (too many active runs)";
    case "RUN_STARTED":
      return "run started";
    case "STAGE_STARTED":
      return `${stageProgress(s(p.stage))} started${p.attempt && Number(p.attempt) > 1 ? ` (attempt ${s(p.attempt)})` : ""}`;
    case "STAGE_COMPLETED":
      return `${stageProgress(s(p.stage))} done`;
    case "PLAN_CREATED": {
      const plan = p.plan as { tasks?: unknown[]; summary?: string } | undefined;
      const tasks = plan?.tasks ? ` · ${plan.tasks.length} task${plan.tasks.length === 1 ? "" : "s"}` : "";
      return `plan v${s(p.version)}${tasks}${plan?.summary ? ` · ${oneLine(plan.summary, 70)}` : ""}`;
    }
    case "PLAN_EDITED":
      return `plan edited → v${s(p.version)}`;
    case "APPROVAL_REQUESTED":
      return `⏸ ${s(p.kind)} gate #${s(p.gateNumber)} waits for a decision`;
    case "APPROVAL_GRANTED":
      return `✓ approved${p.editedPlan ? " (edited plan)" : ""}${p.notes ? `: ${oneLine(s(p.notes), 60)}` : ""}`;
    case "APPROVAL_REJECTED":
      return `✗ rejected: ${oneLine(s(p.feedback), 70)}`;
    case "FIX_DECISION_MADE":
      return `fix decision: ${s(p.decision)}`;
    case "CLARIFICATION_REQUESTED":
      return `? ${s(p.stage)} asks: ${oneLine(s(p.question), 70)} (answer: ${CLI} answer ${s(p.clarificationId)})`;
    case "CLARIFICATION_ANSWERED":
      return "✓ answered";
    case "TASK_STARTED":
      return `  task ${s(p.index)}/${s(p.total)} ${s(p.taskId)}`;
    case "TASK_COMPLETED":
      return `  task ${s(p.taskId)} done${p.commitSha ? ` @ ${s(p.commitSha).slice(0, 8)}` : ""}`;
    case "TASK_TRIAGED":
      return `  task ${s(p.taskId)} ${p.skipped ? "already done, skipped" : "may be done, implemented anyway"} (confidence ${Math.round(Number(p.confidence) * 100)}%)`;
    case "TASK_PROGRESS":
      return `  task ${s(p.taskId)} at ${Math.round(Number(p.progress) * 100)}%: ${oneLine(s(p.changed), 70)}`;
    case "TASK_VERIFIED":
      return `  task ${s(p.taskId)} verified`;
    case "TASK_VERIFY_FAILED":
      return `  ✗ task ${s(p.taskId)} failed its check \`${oneLine(s(p.command), 50)}\` (exit ${p.exitCode ?? "timeout"})`;
    case "DEBUG_CLASSIFIED":
      return `  debug ${s(p.taskId)}: ${s(p.category)} → ${s(p.action)}: ${oneLine(s(p.reason), 60)}`;
    case "CONTEXT_SUMMARISED":
      return `  context summarised (${s(p.omittedMessages)} earlier messages, budget ${s(p.budget)} tokens)`;
    case "POLICY_REFUSED":
      return `  ✗ policy refused ${oneLine(s(p.summary), 40)}: ${oneLine(s(p.reason), 70)}`;
    case "IMPLEMENTATION_SUCCEEDED":
      return `implementation succeeded (attempt ${s(p.attempt)})`;
    case "IMPLEMENTATION_FAILED":
      return `implementation failed (attempt ${s(p.attempt)}): ${oneLine(s(p.reason), 70)}`;
    case "VALIDATION_PASSED":
      return `✓ validation passed${p.score !== undefined ? ` (score ${s(p.score)})` : ""}`;
    case "VALIDATION_FAILED":
      return `✗ validation failed${p.score !== undefined ? ` (score ${s(p.score)})` : ""}${p.summary ? `: ${oneLine(s(p.summary), 60)}` : ""}`;
    case "ARTIFACT_CREATED":
      return `  artifact ${s(p.type)} ${s(p.path)}`;
    case "BRANCH_CREATED":
      return `branch ${s(p.branch)}`;
    case "BRANCH_PUSHED":
      return `pushed ${s(p.branch)} @ ${s(p.sha).slice(0, 8)}`;
    case "PR_OPENED":
      return `pull request #${s(p.number)} opened: ${s(p.url)}`;
    case "PR_MERGED":
      return `merged${p.number ? ` #${s(p.number)}` : ""}${p.sha ? ` @ ${s(p.sha).slice(0, 8)}` : ""}`;
    case "RUN_PAUSED":
      return `⏸ paused (${s(p.reason)}): ${oneLine(s(p.message), 70)}`;
    case "RUN_RESUMED":
      return `resumed${p.action ? ` (${s(p.action)})` : ""}`;
    case "RUN_COMPLETED":
      return `● completed${p.summary ? `: ${oneLine(s(p.summary), 70)}` : ""}`;
    case "RUN_FAILED":
      return `● failed${p.stage ? ` in ${s(p.stage)}` : ""}: ${oneLine(s(p.reason), 80)}`;
    case "RUN_CANCELLED":
      return `● cancelled${p.reason ? `: ${oneLine(s(p.reason), 70)}` : ""}`;
    default:
      return type.toLowerCase().replace(/_/g, " ");
  }
}
