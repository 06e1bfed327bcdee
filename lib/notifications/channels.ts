import nodemailer from "nodemailer";
import { WebClient } from "@slack/web-api";
import { Api } from "grammy";
import { Webhook } from "standardwebhooks";
import { z } from "zod";
import { getEnv } from "@/lib/env";
import type { NotificationKind } from "@/lib/db/schema";
import { holdsSecret } from "@/lib/redact";
import { assertReachableHost, literalHostProblem } from "./address-policy";
import type { ChatButton } from "./buttons";

/*
 * The four channels, each on its field's standard library: Standard Webhooks signatures (standardwebhooks), SMTP
 * (nodemailer), Slack's Web API (@slack/web-api) and Telegram's Bot API (grammY). Each sender makes one attempt and
 * throws on failure: retries and backoff are the Inngest step's (inngest/notify.ts), so a retry
 * survives a restart and is recorded.
 */

export const NOTIFICATION_KINDS = ["webhook", "email", "slack", "telegram"] as const satisfies readonly NotificationKind[];
export const PERSONAL_KINDS = ["email", "telegram"] as const satisfies readonly NotificationKind[];
export type PersonalKind = (typeof PERSONAL_KINDS)[number];

const httpUrl = z
  .string()
  .trim()
  .url("must be an http(s) URL")
  .max(2_000, "must be at most 2000 characters")
  .refine((v) => /^https?:\/\//i.test(v), "must be an http(s) URL")
  .superRefine((v, ctx) => {
    const problem = URL.canParse(v) ? literalHostProblem(new URL(v).hostname) : null;
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });
/** An identifier holding a key is refused (issue #29.7): stored redacted it would name nothing. */
const noSecret = (v: string) => !holdsSecret(v);
const NO_SECRET = "must not hold a secret (an API key or token)";
const email = z.string().trim().toLowerCase().email("must be an email address").max(320).refine(noSecret, NO_SECRET);
const telegramChat = z
  .string()
  .trim()
  .regex(/^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$/, "must be a numeric Telegram chat id (e.g. -1001234567890) or @channelname");

/** What each project channel shows back and needs (its secret is separate, see SECRET_RULES). */
export const projectConfigSchemas = {
  webhook: z.strictObject({ url: httpUrl }),
  email: z.strictObject({
    host: z
      .string()
      .trim()
      .min(1, "must name the SMTP server")
      .max(253)
      .superRefine((v, ctx) => {
        const problem = literalHostProblem(v);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      }),
    port: z.coerce.number().int().min(1, "must be a port number (1-65535)").max(65535, "must be a port number (1-65535)"),
    /** Implicit TLS (port 465); otherwise STARTTLS is used when the server offers it. */
    secure: z.boolean().default(false),
    username: z.string().trim().max(320).optional(),
    from: email,
    to: z.array(email).min(1, "must list at least one address").max(50, "at most 50 addresses"),
  }),
  slack: z.strictObject({ channel: z.string().trim().min(1, "must name a channel (#name or its id)").max(100).refine(noSecret, NO_SECRET) }),
  telegram: z.strictObject({ chatId: telegramChat }),
} as const;

export const personalConfigSchemas = {
  email: z.strictObject({ address: email }),
  telegram: z.strictObject({ chatId: telegramChat }),
} as const;

export type ProjectConfig<K extends NotificationKind = NotificationKind> = z.output<(typeof projectConfigSchemas)[K]>;

/** Each kind's secret: whether a project channel needs one, and its shape. */
export const SECRET_RULES: Record<NotificationKind, { required: boolean; schema: z.ZodType<string>; what: string }> = {
  webhook: {
    required: true,
    what: "the signing secret (whsec_ followed by 24 to 64 random bytes in base64)",
    schema: z
      .string()
      .trim()
      .refine((v) => {
        const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(v);
        const n = m ? Buffer.from(m[1]!, "base64").length : 0;
        return n >= 24 && n <= 64;
      }, "must be whsec_ followed by 24 to 64 random bytes in base64 (Standard Webhooks)"),
  },
  email: { required: false, what: "the SMTP password", schema: z.string().min(1).max(1_000) },
  slack: {
    required: true,
    what: "a Slack bot token (xoxb-…)",
    schema: z.string().trim().regex(/^xox[abpe]-[A-Za-z0-9-]{8,}$/, "must be a Slack token (xoxb-…)"),
  },
  telegram: {
    required: true,
    what: "a Telegram bot token (123456:ABC…)",
    schema: z.string().trim().regex(/^\d{3,20}:[A-Za-z0-9_-]{20,}$/, "must be a Telegram bot token (123456789:AA…)"),
  },
};

/** A notice about a decision someone has to make, or about a run; holds no secret, so it is stored and can be sent again. */
export type NotificationMessage = {
  /** One line: what is asked, on which run. */
  title: string;
  /** A few lines of plain text, ending with the link. */
  text: string;
  /** The run page, at the gate or question. */
  url: string;
  runId: string;
  runTitle: string;
  projectId: string;
  projectName: string;
  /** The gate or question; for a run notice, the run (kind: completed, failed, paused). */
  subject: { type: "gate" | "clarification" | "run"; id: string; kind: string };
  reason: "opened" | "reminder" | "escalated" | "defaulted" | "completed" | "failed" | "paused";
  /** Decisions that can be made from chat (Slack buttons, Telegram inline keyboard); absent on older stored notices. */
  buttons?: ChatButton[];
  /** When the decision is due (config.deadlines), ISO; absent or null without a deadline. */
  deadline?: string | null;
};

/** The Standard Webhooks event type of a decision notice. */
export const WEBHOOK_EVENT_TYPE = "decision.notify";

type Send<C> = { config: C; secret: string | null; message: NotificationMessage; messageId: string };

const TIMEOUT_MS = 15_000;

export async function sendWebhook({ config, secret, message, messageId }: Send<ProjectConfig<"webhook">>) {
  if (!secret) throw new Error("the webhook has no signing secret");
  const now = new Date();
  // The payload shape the spec recommends: type, timestamp and the event's data.
  const body = JSON.stringify({ type: WEBHOOK_EVENT_TYPE, timestamp: now.toISOString(), data: message });
  const signature = new Webhook(secret).sign(messageId, now, body);
  await assertReachableHost(new URL(config.url).hostname);
  const response = await fetch(config.url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "user-agent": "Gatehouse-Webhooks",
      "webhook-id": messageId,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": signature,
    },
    body,
    redirect: "manual",
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  await response.body?.cancel().catch(() => undefined);
  if (!response.ok) throw new Error(`the endpoint answered HTTP ${response.status}`);
  return { detail: `HTTP ${response.status}` };
}

export async function sendEmail({ config, secret, message, to }: Send<ProjectConfig<"email">> & { to: string[] }) {
  await assertReachableHost(config.host);
  const transport = nodemailer.createTransport({
    host: config.host,
    port: config.port,
    secure: config.secure,
    auth: config.username ? { user: config.username, pass: secret ?? "" } : undefined,
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: TIMEOUT_MS,
  });
  try {
    const info = await transport.sendMail({
      from: config.from,
      to,
      subject: message.title,
      text: message.text,
      headers: { "X-Gatehouse-Run": message.runId },
    });
    return { detail: info.response };
  } finally {
    transport.close();
  }
}

export async function sendSlack({ config, secret, message }: Send<ProjectConfig<"slack">>) {
  if (!secret) throw new Error("the Slack channel has no bot token");
  const client = new WebClient(secret, {
    slackApiUrl: getEnv().GATEHOUSE_SLACK_API_URL ?? "https://slack.com/api/",
    // One attempt here: the Inngest step retries with backoff, durably.
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: TIMEOUT_MS,
  });
  const result = await client.chat.postMessage({
    channel: config.channel,
    text: `${message.title}\n${message.url}`,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text: `*${escapeSlack(message.title)}*\n${escapeSlack(message.text)}` } },
      {
        type: "actions",
        block_id: "gatehouse",
        elements: [
          // Pressed, each goes to POST /api/slack/interactions (lib/chat/slack.ts); the code names the decision.
          ...(message.buttons ?? []).map((b) => ({
            type: "button",
            action_id: b.code,
            value: b.code,
            text: { type: "plain_text", text: b.label },
            ...(b.style ? { style: b.style } : {}),
          })),
          { type: "button", action_id: "open", text: { type: "plain_text", text: "Open in Gatehouse" }, url: message.url },
        ],
      },
    ] as never,
    unfurl_links: false,
  });
  return { detail: `ts ${result.ts ?? "?"}` };
}

function escapeSlack(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

export async function sendTelegram({ secret, message, chatId }: Send<unknown> & { chatId: string }) {
  if (!secret) throw new Error("the Telegram channel has no bot token");
  const api = new Api(secret, {
    apiRoot: getEnv().GATEHOUSE_TELEGRAM_API_ROOT ?? "https://api.telegram.org",
    timeoutSeconds: TIMEOUT_MS / 1000,
  });
  const buttons = message.buttons ?? [];
  const sent = await api.sendMessage(chatId, `${message.title}\n\n${message.text}`, {
    link_preview_options: { is_disabled: true },
    // Pressed, each comes back to the bot's webhook (POST /api/telegram/webhook/:channelId, lib/chat/telegram.ts).
    ...(buttons.length ? { reply_markup: { inline_keyboard: chunk(buttons.map((b) => ({ text: b.label, callback_data: b.code })), 3) } } : {}),
  });
  return { detail: `message ${sent.message_id}` };
}

function chunk<T>(items: T[], size: number): T[][] {
  const rows: T[][] = [];
  for (let i = 0; i < items.length; i += size) rows.push(items.slice(i, i + size));
  return rows;
}

/** What a channel goes to, fit to show in the delivery log (a webhook's host only: its path may carry a token). */
export function describeTarget({ kind, config, to }: { kind: NotificationKind; config: Record<string, unknown>; to?: string[] }): string {
  switch (kind) {
    case "webhook":
      return new URL(String(config.url)).host;
    case "email":
      return (to ?? (config.to as string[] | undefined) ?? []).join(", ");
    case "slack":
      return String(config.channel);
    case "telegram":
      return `chat ${String(config.chatId)}`;
  }
}
