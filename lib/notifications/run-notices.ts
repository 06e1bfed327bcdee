import crypto from "node:crypto";
import { and, desc, eq, inArray, isNull } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { gates, notificationChannels, notificationDeliveries, projects, workflowEvents, workflowRuns, type NoticeLevel } from "@/lib/db/schema";
import { eventTypeIn, getRunState } from "@/lib/db/event-store";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";
import { costBreakdownForRun } from "@/lib/runs/costs";
import { runTitle } from "@/lib/runs/title";
import type { RunNoticeKind } from "@/lib/runs/steps/notices";
import { gateButtons, pauseButtons } from "./buttons";
import { describeTarget, type NotificationMessage } from "./channels";
import { decidersOf } from "./dispatch";

/*
 * Run notices: a run completed (its branch or pull request, its cost), failed (why), or paused (why, what to do, a
 * link, and the buttons to retry, extend or cancel). Each channel, and each person's own channel, chooses what it
 * receives (notification_channels.notices): decisions only (the default, as before), decisions and run ends, or
 * everything (pauses too). Planned and delivered like decision notices (dispatch.ts): one logged, retried and
 * redeliverable delivery per channel, each an Inngest step (inngest/functions/notify-run.ts).
 */

export const NOTICE_LEVELS = ["decisions", "run_ends", "everything"] as const satisfies readonly NoticeLevel[];

/** Whether a channel at `level` receives a run notice of `kind`. */
export function levelAllows(level: NoticeLevel, kind: RunNoticeKind): boolean {
  if (kind === "paused") return level === "everything";
  return level === "run_ends" || level === "everything";
}

/** What to do about a pause, by its reason (RUN_PAUSED.reason). */
const PAUSE_ADVICE: Record<string, string> = {
  model_outage: "The model provider is unavailable. Retry when it is back, or change the stage's model in the run config.",
  model_auth: "The model provider refused the credentials. Fix the API key on the server, then Retry.",
  timeout: "The stage ran past its time limit. Extend it to give it more time, or Cancel.",
  invalid_plan: "The planner's diagram is not valid Mermaid. Fix the plan by hand on the run page, or Retry to plan again.",
  secret_detected: "A secret was found in the work and withheld. Review it on the run page, then Retry or Cancel.",
  merge_conflict: "The branch conflicts with its base. Resolve the conflict, then Retry.",
  sandbox: "The sandbox could not be prepared. Check the server's sandbox, then Retry.",
  by_person: "A person paused it. Retry (resume) to continue where it stopped.",
  budget: "Raise the budget (by the amount shown, or type one), let the task in progress finish and stop (implementation only), or Cancel the run. Nothing fails meanwhile.",
  storage: "The disk where Gatehouse writes is full or read-only. Free space or make it writable, then Retry.",
  database: "The database could not be written for a while; the run went on by itself once it was back. Nothing to do unless it repeats.",
};

const usd = (n: number) => `$${n.toFixed(n < 1 ? 4 : 2)}`;

/**
 * The notice's text, from what is stored (a model's words redacted). `gateId`: the run stopped at a budget gate, told
 * as a pause (reason budget) with the gate's own buttons.
 */
export async function buildRunMessage({ runId, kind, gateId }: { runId: string; kind: RunNoticeKind; gateId?: string }): Promise<NotificationMessage> {
  const db = await getDb();
  const [row] = await db
    .select({ projectId: workflowRuns.projectId, projectName: projects.name, request: workflowRuns.originalRequest })
    .from(workflowRuns)
    .innerJoin(projects, eq(projects.id, workflowRuns.projectId))
    .where(eq(workflowRuns.id, runId));
  const state = await getRunState({ id: runId });
  if (!row || !state) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  const title = runTitle(row.request);
  let url = `${getEnv().publicUrl}/runs/${runId}`;
  const lines: string[] = [`Project: ${row.projectName}`, `Run: ${title}`];
  let headline: string;
  let buttons: NotificationMessage["buttons"] = [];
  if (kind === "completed") {
    headline = "completed";
    const [pr] = await db
      .select({ payload: workflowEvents.payload })
      .from(workflowEvents)
      .where(and(eq(workflowEvents.workflowRunId, runId), eq(workflowEvents.type, "PR_OPENED")))
      .orderBy(desc(workflowEvents.sequence))
      .limit(1);
    const prUrl = (pr?.payload as { url?: string } | undefined)?.url;
    lines.push(prUrl ? `Pull request: ${prUrl}` : `Branch: ${state.branch ?? "—"}`);
    const cost = (await costBreakdownForRun({ runId })).byStage.reduce((sum, s) => sum + s.usd, 0);
    lines.push(`Cost: ${usd(cost)}`);
  } else if (kind === "failed") {
    headline = "failed";
    const [failed] = await db
      .select({ payload: workflowEvents.payload })
      .from(workflowEvents)
      .where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(["RUN_FAILED"])))
      .orderBy(desc(workflowEvents.sequence))
      .limit(1);
    const why = (failed?.payload as { reason?: string; stage?: string } | undefined) ?? {};
    lines.push(`Why: ${redact(why.reason ?? "unknown").slice(0, 500)}${why.stage ? ` (in ${why.stage})` : ""}`);
    if (state.branch) lines.push(`Branch (kept): ${state.branch}`);
  } else if (gateId) {
    const gate = await db.query.gates.findFirst({ where: and(eq(gates.id, gateId), eq(gates.workflowRunId, runId)) });
    if (!gate) throw new AppError("not_found:gate", `Gate ${gateId} does not exist on run ${runId}.`);
    const ctx = (gate.context ?? {}) as { reason?: string; stage?: string };
    headline = "paused (budget)";
    url = `${url}#gate-${gate.id}`;
    lines.push(`Why: ${redact(ctx.reason ?? `The ${ctx.stage ?? "stage"} budget is spent.`).slice(0, 500)}`);
    lines.push(`What to do: ${PAUSE_ADVICE.budget}`);
    buttons = gateButtons(gate);
  } else {
    const pause = state.pauseReason;
    const reason = pause?.reason ?? "other";
    headline = `paused (${reason.replaceAll("_", " ")})`;
    if (pause?.message) lines.push(`Why: ${redact(pause.message).slice(0, 500)}`);
    lines.push(`What to do: ${PAUSE_ADVICE[reason] ?? "See the run page, then Retry or Cancel."}`);
    buttons = pauseButtons({ runId, reason });
  }
  lines.push(`Open: ${url}`);
  return {
    title: `[${row.projectName}] Run "${title}" ${headline}`,
    text: lines.join("\n"),
    url,
    runId,
    runTitle: title,
    projectId: row.projectId,
    projectName: row.projectName,
    subject: { type: "run", id: runId, kind },
    reason: kind,
    buttons,
  };
}

/**
 * One pending delivery per enabled project channel whose level takes this kind, and per deciding member's enabled
 * personal channel whose level takes it (sent through the project's channel of its kind, as decision notices are).
 * `dispatchKey` (the notice event's id) makes planning the same notice again insert nothing twice.
 */
export async function planRunNotice({
  runId,
  kind,
  gateId,
  dispatchKey,
}: {
  runId: string;
  kind: RunNoticeKind;
  gateId?: string;
  dispatchKey: string;
}): Promise<Array<{ id: string; kind: string }>> {
  const idFor = (channelId: string) => `ntf_${crypto.createHash("sha256").update(`${dispatchKey}:${channelId}`).digest("hex").slice(0, 26)}`;
  const message = await buildRunMessage({ runId, kind, gateId });
  const db = await getDb();
  const projectChannels = await db
    .select()
    .from(notificationChannels)
    .where(and(eq(notificationChannels.projectId, message.projectId), eq(notificationChannels.enabled, true)));
  const people = await decidersOf({ projectId: message.projectId });
  const personal = people.length
    ? await db
        .select()
        .from(notificationChannels)
        .where(and(inArray(notificationChannels.userId, people), isNull(notificationChannels.projectId), eq(notificationChannels.enabled, true)))
    : [];
  const base = { projectId: message.projectId, workflowRunId: runId, subjectType: "run" as const, subjectId: runId, reason: kind, message: message as unknown as Record<string, unknown> };
  const rows: Array<typeof notificationDeliveries.$inferInsert> = [];
  for (const channel of projectChannels) {
    if (!levelAllows(channel.notices, kind)) continue;
    const id = idFor(channel.id);
    rows.push({ ...base, id, channelId: channel.id, kind: channel.kind, target: describeTarget({ kind: channel.kind, config: channel.config }), messageId: `msg_${id.slice(4)}` });
  }
  // An address already on the project's email list gets the list's copy only (as with decision notices).
  const listed = new Set(((projectChannels.find((c) => c.kind === "email" && levelAllows(c.notices, kind))?.config.to as string[] | undefined) ?? []).map((a) => a.toLowerCase()));
  for (const channel of personal) {
    if (!levelAllows(channel.notices, kind) || !projectChannels.some((c) => c.kind === channel.kind)) continue;
    if (channel.kind === "email" && listed.has(String(channel.config.address).toLowerCase())) continue;
    const id = idFor(channel.id);
    const target = channel.kind === "email" ? String(channel.config.address) : `chat ${String(channel.config.chatId)}`;
    rows.push({ ...base, id, channelId: channel.id, kind: channel.kind, recipientUserId: channel.userId, target, messageId: `msg_${id.slice(4)}` });
  }
  if (rows.length === 0) return [];
  await write((tx) => tx.insert(notificationDeliveries).values(rows).onConflictDoNothing());
  return rows.map((r) => ({ id: r.id, kind: r.kind }));
}
