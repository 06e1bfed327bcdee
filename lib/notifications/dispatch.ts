import crypto from "node:crypto";
import { and, eq, inArray, isNull, ne, sql } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { clarificationRequests, gates, notificationChannels, notificationDeliveries, projectMembers, projects, workflowRuns, type NotificationKind } from "@/lib/db/schema";
import { appendEventsTx } from "@/lib/db/event-store";
import { requireProjectRole, roleAllows, type SessionUser } from "@/lib/auth/guard";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { log } from "@/lib/log";
import { redact } from "@/lib/redact";
import { runTitle } from "@/lib/runs/title";
import { deadlineViews, mayDecideEscalated } from "@/lib/runs/deadlines";
import { decryptSecret } from "./crypto";
import {
  describeTarget,
  projectConfigSchemas,
  sendEmail,
  sendSlack,
  sendTelegram,
  sendWebhook,
  type NotificationMessage,
} from "./channels";
import { gateButtons, questionButtons, type ChatButton } from "./buttons";
import { findProjectChannel, toDeliveryView, type ChannelRow, type DeliveryRow, type DeliveryView } from "./store";

/*
 * Sending decision notices: who and where (planDeliveries), one attempt on one channel (attemptDelivery), and what
 * a final failure leaves behind (recordDeliveryFailure). The Inngest functions notify-decision and notify-redeliver
 * call these inside steps; nothing here ever touches the run's state except appending NOTIFICATION_FAILED.
 */

export type NotifySubject = { type: "gate" | "clarification"; id: string };
export type NotifyReason = "opened" | "reminder" | "escalated" | "defaulted";

const REASON_TEXT: Record<NotifyReason, string> = {
  opened: "waits for a decision",
  reminder: "is still waiting for a decision (reminder)",
  escalated: "was escalated to you",
  defaulted: "passed its deadline; its declared default was applied",
};

/** A deadline in a notice: to the second, in UTC (the reader's time zone is unknown). */
function formatWhen(at: number): string {
  return `${new Date(at).toISOString().replace("T", " ").slice(0, 19)} UTC`;
}

/**
 * The notice's text, from what is stored: run, project, and the gate or question (redacted where it came from a model),
 * with its deadline when it has one (config.deadlines): when it is due, or that it passed and what happened then.
 */
export async function buildMessage({ runId, subject, reason }: { runId: string; subject: NotifySubject; reason: NotifyReason }): Promise<NotificationMessage> {
  const db = await getDb();
  const [run] = await db
    .select({ id: workflowRuns.id, request: workflowRuns.originalRequest, projectId: workflowRuns.projectId, projectName: projects.name })
    .from(workflowRuns)
    .innerJoin(projects, eq(projects.id, workflowRuns.projectId))
    .where(eq(workflowRuns.id, runId));
  if (!run) throw new AppError("not_found:run", `Run ${runId} does not exist.`);
  const title = runTitle(run.request);
  let what: string;
  let detail = "";
  let kind: string;
  let buttons: ChatButton[] = [];
  if (subject.type === "gate") {
    const gate = await db.query.gates.findFirst({ where: and(eq(gates.id, subject.id), eq(gates.workflowRunId, runId)) });
    if (!gate) throw new AppError("not_found:gate", `Gate ${subject.id} does not exist on run ${runId}.`);
    kind = gate.kind;
    buttons = gateButtons(gate);
    what = `A ${gate.kind} gate`;
    const question = (gate.context as { question?: unknown } | null)?.question;
    if (typeof question === "string") detail = `Question: ${redact(question).slice(0, 500)}`;
  } else {
    const row = await db.query.clarificationRequests.findFirst({
      where: and(eq(clarificationRequests.id, subject.id), eq(clarificationRequests.workflowRunId, runId)),
    });
    if (!row) throw new AppError("not_found:clarification", `Question ${subject.id} does not exist on run ${runId}.`);
    kind = "question";
    buttons = questionButtons(row);
    what = `A question (${row.stage})`;
    detail = `Question: ${redact(row.question).slice(0, 500)}`;
  }
  // The run page's anchors, as the inbox links them: #gate-… and #question-….
  const url = `${getEnv().publicUrl}/runs/${runId}#${subject.type === "gate" ? "gate" : "question"}-${subject.id}`;
  const deadline = (await deadlineViews({ runId }))[subject.id] ?? null;
  const when = deadline ? formatWhen(deadline.at) : null;
  const suffix = !when ? "" : reason === "reminder" ? ` (due ${when})` : reason === "escalated" ? ` (its deadline ${when} passed)` : "";
  const headline = `${what} on "${title}" ${REASON_TEXT[reason]}${suffix}`;
  const onTimeout = deadline?.onTimeout;
  const deadlineLine = !when
    ? ""
    : reason === "escalated"
      ? `Nobody decided by the deadline (${when}): you may now decide it as its backup approver.`
      : reason === "defaulted"
        ? `Nobody decided by the deadline (${when}): the declared default${onTimeout?.action === "default" ? ` "${onTimeout.answer}"` : ""} was applied.`
        : `Decide by ${when}; ${onTimeout?.action === "escalate" ? "then it escalates to a backup approver" : onTimeout?.action === "default" ? "then the declared default applies" : "then the run is cancelled"}.`;
  return {
    title: `[${run.projectName}] ${headline}`,
    text: [`Project: ${run.projectName}`, `Run: ${title}`, `${what} ${REASON_TEXT[reason]}.`, deadlineLine, detail, `Open: ${url}`].filter(Boolean).join("\n"),
    url,
    runId,
    runTitle: title,
    projectId: run.projectId,
    projectName: run.projectName,
    subject: { ...subject, kind },
    reason,
    deadline: deadline ? new Date(deadline.at).toISOString() : null,
    // A default already applied leaves nothing to decide.
    ...(reason === "defaulted" ? {} : { buttons }),
  };
}

/**
 * Who may decide: the given user ids (only members whose role lets them decide, or the backup approvers the subject's
 * deadline escalated it to (mayDecideEscalated), so a notice never reaches an outsider), else every member whose role
 * may decide on the project (the rule requireProjectRole applies to the decision routes).
 */
export async function decidersOf({
  projectId,
  recipients,
  escalation,
}: {
  projectId: string;
  recipients?: string[];
  /** The decision the recipients were named for: a viewer it escalated to may decide it. */
  escalation?: { runId: string; subject: NotifySubject };
}): Promise<string[]> {
  const db = await getDb();
  const members = await db.select({ userId: projectMembers.userId, role: projectMembers.role }).from(projectMembers).where(eq(projectMembers.projectId, projectId));
  if (!recipients) return members.filter((m) => roleAllows(m.role, "decide")).map((m) => m.userId);
  const named = members.filter((m) => recipients.includes(m.userId));
  const allowed = await Promise.all(
    named.map(async (m) => roleAllows(m.role, "decide") || (!!escalation && (await mayDecideEscalated({ ...escalation, projectId, userId: m.userId })))),
  );
  return named.filter((_, i) => allowed[i]).map((m) => m.userId);
}

/**
 * Write one pending delivery per enabled project channel, and per decider's enabled personal channel whose project
 * transport exists (their email through the project's SMTP server, their Telegram chat through its bot). One
 * transaction: a retried step finds nothing half-written.
 */
export async function planDeliveries({
  runId,
  subject,
  reason,
  recipients,
  dispatchKey,
}: {
  runId: string;
  subject: NotifySubject;
  reason: NotifyReason;
  recipients?: string[];
  /** The notify event's id: the same event planned again (a retried step) finds the rows it wrote, not new ones. */
  dispatchKey?: string;
}): Promise<Array<{ id: string; kind: NotificationKind }>> {
  const key = dispatchKey ?? newId("ntf");
  // Ids derived from the event and the channel: a second planning of the same event inserts nothing twice.
  const idFor = (channelId: string) => `ntf_${crypto.createHash("sha256").update(`${key}:${channelId}`).digest("hex").slice(0, 26)}`;
  const message = await buildMessage({ runId, subject, reason });
  const projectId = message.projectId;
  const db = await getDb();
  const projectChannels = await db
    .select()
    .from(notificationChannels)
    .where(and(eq(notificationChannels.projectId, projectId), eq(notificationChannels.enabled, true)));
  const deciders = await decidersOf({ projectId, recipients, escalation: { runId, subject } });
  const personal = deciders.length
    ? await db
        .select()
        .from(notificationChannels)
        .where(and(inArray(notificationChannels.userId, deciders), isNull(notificationChannels.projectId), eq(notificationChannels.enabled, true)))
    : [];
  type Row = typeof notificationDeliveries.$inferInsert;
  const rows: Row[] = [];
  const base = { projectId, workflowRunId: runId, subjectType: subject.type, subjectId: subject.id, reason, message: message as unknown as Record<string, unknown> };
  for (const channel of projectChannels) {
    const id = idFor(channel.id);
    rows.push({ ...base, id, channelId: channel.id, kind: channel.kind, target: describeTarget({ kind: channel.kind, config: channel.config }), messageId: `msg_${id.slice(4)}` });
  }
  const listed = new Set(((projectChannels.find((c) => c.kind === "email")?.config.to as string[] | undefined) ?? []).map((a) => a.toLowerCase()));
  for (const channel of personal) {
    if (!projectChannels.some((c) => c.kind === channel.kind)) continue; // no project SMTP server or bot to send it with
    if (channel.kind === "email" && listed.has(String(channel.config.address).toLowerCase())) continue; // already on the list
    const target = channel.kind === "email" ? String(channel.config.address) : `chat ${String(channel.config.chatId)}`;
    const id = idFor(channel.id);
    rows.push({ ...base, id, channelId: channel.id, kind: channel.kind, recipientUserId: channel.userId, target, messageId: `msg_${id.slice(4)}` });
  }
  if (rows.length === 0) return [];
  await write(async (tx) => {
    await tx.insert(notificationDeliveries).values(rows).onConflictDoNothing();
  });
  return rows.map((r) => ({ id: r.id, kind: r.kind }));
}

/** The channel rows a delivery is sent through: its own, and for a personal one the project's channel of its kind. */
async function channelsOf(delivery: DeliveryRow): Promise<{ transport: ChannelRow; personal: ChannelRow | null }> {
  const db = await getDb();
  const own = delivery.channelId ? await db.query.notificationChannels.findFirst({ where: eq(notificationChannels.id, delivery.channelId) }) : undefined;
  if (delivery.recipientUserId) {
    const transport = await findProjectChannel({ projectId: delivery.projectId, kind: delivery.kind });
    if (!own) throw new Error(`the recipient removed their ${delivery.kind} channel`);
    if (!transport) throw new Error(`the project has no ${delivery.kind} channel to send it through`);
    return { transport, personal: own };
  }
  if (!own) throw new Error(`the project's ${delivery.kind} channel was removed`);
  return { transport: own, personal: null };
}

/** Send through one channel once. A secret appears in no error message (redacted with the secret itself). */
export async function sendThrough({
  kind,
  transport,
  personal,
  message,
  messageId,
}: {
  kind: NotificationKind;
  transport: ChannelRow;
  personal: ChannelRow | null;
  message: NotificationMessage;
  messageId: string;
}): Promise<{ detail: string }> {
  const secret = transport.secret ? decryptSecret(transport.secret) : null;
  try {
    switch (kind) {
      case "webhook":
        return await sendWebhook({ config: projectConfigSchemas.webhook.parse(transport.config), secret, message, messageId });
      case "email": {
        const config = projectConfigSchemas.email.parse(transport.config);
        return await sendEmail({ config, secret, message, messageId, to: personal ? [String(personal.config.address)] : config.to });
      }
      case "slack":
        return await sendSlack({ config: projectConfigSchemas.slack.parse(transport.config), secret, message, messageId });
      case "telegram":
        return await sendTelegram({ config: null, secret, message, messageId, chatId: String((personal ?? transport).config.chatId) });
    }
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    throw new Error(redact(text, secret ? [secret] : []).slice(0, 1_000));
  }
}

/**
 * One attempt of a delivery (an Inngest step; a throw is retried with backoff). Counted and recorded either way, so the
 * delivery log shows how many attempts were made and the last error while retries go on.
 */
export async function attemptDelivery({ deliveryId }: { deliveryId: string }): Promise<{ status: "delivered" | "skipped"; detail?: string }> {
  const db = await getDb();
  const delivery = await db.query.notificationDeliveries.findFirst({ where: eq(notificationDeliveries.id, deliveryId) });
  if (!delivery) return { status: "skipped", detail: "the delivery no longer exists" };
  if (delivery.status === "delivered") return { status: "delivered", detail: "already delivered" };
  // Writes go through the process's write queue (a write on the pool could stall the queue's open transaction).
  await write((tx) =>
    tx
      .update(notificationDeliveries)
      .set({ attempts: sql`${notificationDeliveries.attempts} + 1`, updatedAt: new Date() })
      .where(eq(notificationDeliveries.id, deliveryId)),
  );
  try {
    const { transport, personal } = await channelsOf(delivery);
    const result = await sendThrough({ kind: delivery.kind, transport, personal, message: delivery.message as unknown as NotificationMessage, messageId: delivery.messageId });
    await write((tx) =>
      tx
        .update(notificationDeliveries)
        .set({ status: "delivered", lastError: null, deliveredAt: new Date(), updatedAt: new Date() })
        .where(eq(notificationDeliveries.id, deliveryId)),
    );
    return { status: "delivered", detail: result.detail };
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    await write((tx) => tx.update(notificationDeliveries).set({ lastError: text, updatedAt: new Date() }).where(eq(notificationDeliveries.id, deliveryId)));
    log.warn("notification attempt failed; retrying with backoff", { deliveryId, kind: delivery.kind, error: text });
    throw new Error(`${delivery.kind} delivery ${deliveryId} failed: ${text}`);
  }
}

/**
 * The retries are spent: the delivery is marked failed in the log, and the run gets a NOTIFICATION_FAILED event (once per
 * failure; a redelivery that fails again adds another). The run's state is not changed by it.
 */
export async function recordDeliveryFailure({ deliveryId }: { deliveryId: string }): Promise<{ recorded: boolean }> {
  const failed = await write(async (tx) => {
    const [row] = await tx
      .update(notificationDeliveries)
      .set({ status: "failed", updatedAt: new Date() })
      .where(and(eq(notificationDeliveries.id, deliveryId), ne(notificationDeliveries.status, "delivered")))
      .returning();
    return row ?? null;
  });
  if (!failed) return { recorded: false };
  if (failed.workflowRunId) {
    const runId = failed.workflowRunId;
    // In a transaction of its own (as the workflow's appends are), not appendEvents: that one remembers the projection
    // in this process, and a decision appended meanwhile by the routes (which do not) would leave the memory stale.
    await write((tx) => appendEventsTx(
      tx,
      runId,
      [
        {
          type: "NOTIFICATION_FAILED",
          payload: {
            deliveryId,
            channel: failed.kind,
            personal: !!failed.recipientUserId,
            subject: { type: failed.subjectType, id: failed.subjectId },
            reason: failed.reason,
            attempts: failed.attempts,
            error: (failed.lastError ?? "unknown error").slice(0, 500),
          },
        },
      ],
      { stepKey: `notify:${deliveryId}:failed:${failed.attempts}` },
    ));
  }
  return { recorded: true };
}

/** A failed delivery goes back to pending for another round of attempts (the route then announces it). */
export async function resetForRedelivery({ user, projectId, deliveryId }: { user: SessionUser; projectId: string; deliveryId: string }): Promise<DeliveryView> {
  await requireProjectRole({ user, projectId, action: "manage" });
  return write(async (tx) => {
    const row = await tx.query.notificationDeliveries.findFirst({
      where: and(eq(notificationDeliveries.id, deliveryId), eq(notificationDeliveries.projectId, projectId)),
    });
    if (!row) throw new AppError("not_found:notification", `Delivery ${deliveryId} does not exist on this project.`);
    if (row.status !== "failed") {
      throw new AppError("conflict:notification", `Delivery ${deliveryId} is ${row.status}; only a failed delivery can be sent again.`);
    }
    const [updated] = await tx
      .update(notificationDeliveries)
      .set({ status: "pending", updatedAt: new Date() })
      .where(and(eq(notificationDeliveries.id, deliveryId), eq(notificationDeliveries.status, "failed")))
      .returning();
    if (!updated) throw new AppError("conflict:notification", `Delivery ${deliveryId} is already being sent again.`);
    return toDeliveryView(updated);
  });
}

/** "Send a test": one attempt now on the project's channel, answered with the outcome (not logged as a delivery). */
export async function sendTest({ user, projectId, kind }: { user: SessionUser; projectId: string; kind: NotificationKind }): Promise<{ ok: boolean; detail: string }> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const channel = await findProjectChannel({ projectId, kind });
  if (!channel) throw new AppError("conflict:notification", `This project has no ${kind} channel: save one first.`);
  const db = await getDb();
  const project = await db.query.projects.findFirst({ where: eq(projects.id, projectId) });
  const url = `${getEnv().publicUrl}/projects`;
  const message: NotificationMessage = {
    title: `[${project?.name ?? projectId}] Test notification from Gatehouse`,
    text: `This is a test of the ${kind} channel of project ${project?.name ?? projectId}.\nOpen: ${url}`,
    url,
    runId: "",
    runTitle: "",
    projectId,
    projectName: project?.name ?? "",
    subject: { type: "gate", id: "test", kind: "test" },
    reason: "opened",
  };
  try {
    const result = await sendThrough({ kind, transport: channel, personal: null, message, messageId: `msg_${newId("ntf").slice(4)}` });
    return { ok: true, detail: result.detail };
  } catch (error) {
    return { ok: false, detail: error instanceof Error ? error.message : String(error) };
  }
}
