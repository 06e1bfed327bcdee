import crypto from "node:crypto";
import { WebClient } from "@slack/web-api";
import { z } from "zod";
import { getDb } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { discardBody, readUnverifiedBody } from "@/lib/body";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { log } from "@/lib/log";
import { findProjectChannel } from "@/lib/notifications/store";
import { decryptSecret } from "@/lib/notifications/crypto";
import { budgetMetric, parseCode, suggestedRaise, type ChatCode } from "@/lib/notifications/buttons";
import { eq } from "drizzle-orm";
import { applyChatAction, subjectOf, type ChatDeciders } from "./actions";
import { linkCommand, runCommand, waitingCommand } from "./commands";
import type { ChatIdentity } from "./link";

/*
 * Slack, inbound: interactions (button presses, modal submissions) on POST /api/slack/interactions and the
 * `/gatehouse` slash command on POST /api/slack/commands. Nothing is parsed before Slack's v0 signature checks out:
 * HMAC-SHA256 of `v0:<timestamp>:<raw body>` under SLACK_SIGNING_SECRET, compared in constant time, and a timestamp
 * more than 5 minutes from now is refused (a replayed request). Presses are answered through the payload's
 * response_url (the original message is updated, or an ephemeral note says why not).
 */

export const SLACK_MAX_AGE_SECONDS = 5 * 60;

export function slackSignature({ secret, timestamp, body }: { secret: string; timestamp: string; body: string | Buffer }): string {
  return `v0=${crypto.createHmac("sha256", secret).update(`v0:${timestamp}:`).update(body).digest("hex")}`;
}

/** Read and verify a Slack request; its raw body as text. 401 for a missing, wrong or stale signature. */
export async function readSlackRequest(request: Request, now = Date.now()): Promise<string> {
  const secret = getEnv().SLACK_SIGNING_SECRET;
  if (!secret) {
    await discardBody(request);
    throw new AppError("unavailable:chat", "Slack is not configured on this server (SLACK_SIGNING_SECRET).");
  }
  const timestamp = request.headers.get("x-slack-request-timestamp")?.trim() ?? "";
  const signature = request.headers.get("x-slack-signature")?.trim() ?? "";
  if (!/^\d{1,12}$/.test(timestamp) || !/^v0=[0-9a-f]{64}$/.test(signature)) {
    await discardBody(request);
    throw new AppError("unauthorized:chat", "The Slack signature (X-Slack-Signature, X-Slack-Request-Timestamp) is missing or malformed.");
  }
  if (Math.abs(now / 1000 - Number(timestamp)) > SLACK_MAX_AGE_SECONDS) {
    await discardBody(request);
    throw new AppError("unauthorized:chat", "The Slack request is more than 5 minutes old (or from the future): refused as a possible replay.");
  }
  const mac = crypto.createHmac("sha256", secret).update(`v0:${timestamp}:`);
  const raw = await readUnverifiedBody({
    request,
    limit: getEnv().GATEHOUSE_CHAT_MAX_BYTES,
    surface: "chat",
    what: "The Slack request body (GATEHOUSE_CHAT_MAX_BYTES)",
    onChunk: (chunk) => mac.update(chunk),
  });
  const expected = Buffer.from(`v0=${mac.digest("hex")}`, "utf8");
  const given = Buffer.from(signature, "utf8");
  if (expected.length !== given.length || !crypto.timingSafeEqual(expected, given)) {
    throw new AppError("unauthorized:chat", "The Slack signature (X-Slack-Signature) does not match.");
  }
  return raw.toString("utf8");
}

const identityOf = (team: string | undefined, user: string, name?: string): ChatIdentity => ({
  provider: "slack",
  externalId: `${team ?? "-"}:${user}`,
  displayName: name ?? null,
});

// ---------------------------------------------------------------------------------------------------------------------
// Slash command

/** `/gatehouse link <code>` | `run <project> <request>` | `waiting` | `help`: the ephemeral answer's body. */
export async function handleSlackCommand({ raw, deciders }: { raw: string; deciders: ChatDeciders }): Promise<{ response_type: "ephemeral"; text: string }> {
  const form = new URLSearchParams(raw);
  const userId = form.get("user_id");
  if (!userId) throw new AppError("bad_request:chat", "user_id: missing from the slash command.");
  const identity = identityOf(form.get("team_id") ?? undefined, userId, form.get("user_name") ?? undefined);
  const text = (form.get("text") ?? "").trim();
  const [sub = "", ...rest] = text.split(/\s+/);
  const reply = (t: string) => ({ response_type: "ephemeral" as const, text: t });
  switch (sub.toLowerCase()) {
    case "link":
      return reply(await linkCommand({ identity, code: rest.join("") }));
    case "run": {
      const [project, ...words] = rest;
      if (!project) return reply("Usage: /gatehouse run <project> <request>");
      // The request keeps its own line breaks and spacing: cut after the project's name in the original text.
      const request = text.replace(/^\s*run\s+\S+\s*/i, "");
      return reply(words.length ? await runCommand({ identity, project: { ref: project }, request, deciders }) : "Usage: /gatehouse run <project> <request>");
    }
    case "waiting":
      return reply((await waitingCommand({ identity })).text);
    default:
      return reply("Gatehouse: /gatehouse link <code> · /gatehouse run <project> <request> · /gatehouse waiting");
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Interactions

const blockActionsSchema = z.object({
  type: z.literal("block_actions"),
  user: z.object({ id: z.string(), username: z.string().optional(), name: z.string().optional(), team_id: z.string().optional() }),
  team: z.object({ id: z.string() }).nullish(),
  channel: z.object({ id: z.string() }).nullish(),
  trigger_id: z.string().optional(),
  response_url: z.string().optional(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().optional() })).min(1),
  message: z.object({ blocks: z.array(z.record(z.string(), z.unknown())).optional() }).passthrough().optional(),
});

const viewSubmissionSchema = z.object({
  type: z.literal("view_submission"),
  user: z.object({ id: z.string(), username: z.string().optional(), name: z.string().optional(), team_id: z.string().optional() }),
  team: z.object({ id: z.string() }).nullish(),
  view: z.object({
    callback_id: z.string(),
    private_metadata: z.string().default(""),
    state: z.object({ values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish(), selected_options: z.array(z.object({ value: z.string() })).optional() }))) }),
  }),
});

export const MODAL_CALLBACK = "gatehouse-decision";

/** What the interactions route answers: empty (200) or a view_submission's response_action. */
export type SlackInteractionReply = Record<string, unknown> | null;

/** A Slack interaction (form field `payload`, JSON). Verified already; unknown kinds are acknowledged and ignored. */
export async function handleSlackInteraction({ raw, deciders }: { raw: string; deciders: ChatDeciders }): Promise<SlackInteractionReply> {
  const payloadText = new URLSearchParams(raw).get("payload");
  if (!payloadText) throw new AppError("bad_request:chat", "payload: missing (Slack sends interactions as form field payload=<JSON>).");
  let payload: unknown;
  try {
    payload = JSON.parse(payloadText);
  } catch {
    throw new AppError("bad_request:chat", "payload: not valid JSON.");
  }
  const kind = (payload as { type?: unknown }).type;
  if (kind === "block_actions") return handleBlockActions(blockActionsSchema.parse(payload), deciders);
  if (kind === "view_submission") return handleViewSubmission(viewSubmissionSchema.parse(payload), deciders);
  return null;
}

type BlockActions = z.output<typeof blockActionsSchema>;

async function handleBlockActions(payload: BlockActions, deciders: ChatDeciders): Promise<SlackInteractionReply> {
  const action = payload.actions[0]!;
  const code = parseCode(action.value ?? action.action_id);
  // The "Open in Gatehouse" link button is reported too: nothing to do.
  if (!code) return null;
  const team = payload.team?.id ?? payload.user.team_id;
  const identity = identityOf(team, payload.user.id, payload.user.username ?? payload.user.name);
  const place = `slack ${team ?? "-"}/${payload.channel?.id ?? "-"}`;
  if (needsText(code)) {
    await openModal({ code, triggerId: payload.trigger_id, metadata: { code: action.value ?? action.action_id, responseUrl: payload.response_url, place } });
    return null;
  }
  const outcome = await applyChatAction({ identity, place, code, deciders });
  await respond(payload.response_url, outcome.ok ? decidedMessage(payload.message?.blocks, outcome.text) : { response_type: "ephemeral", replace_original: false, text: outcome.text });
  return null;
}

/** Reject, ask back, a typed (or multiple-choice) answer and a budget raise by a typed amount take text first: a modal. */
function needsText(code: ChatCode): boolean {
  return code.verb === "rj" || code.verb === "ak" || code.verb === "tx" || code.verb === "bx";
}

async function handleViewSubmission(payload: z.output<typeof viewSubmissionSchema>, deciders: ChatDeciders): Promise<SlackInteractionReply> {
  if (payload.view.callback_id !== MODAL_CALLBACK) return null;
  let meta: { code?: string; responseUrl?: string; place?: string };
  try {
    meta = JSON.parse(payload.view.private_metadata || "{}");
  } catch {
    meta = {};
  }
  const code = meta.code ? parseCode(meta.code) : null;
  if (!code) throw new AppError("bad_request:chat", "private_metadata: not a Gatehouse decision.");
  const field = payload.view.state.values.answer?.value;
  const team = payload.team?.id ?? payload.user.team_id;
  const identity = identityOf(team, payload.user.id, payload.user.username ?? payload.user.name);
  const outcome = await applyChatAction({
    identity,
    place: meta.place ?? `slack ${team ?? "-"}`,
    code,
    text: field?.value ?? undefined,
    response: field?.selected_options ? field.selected_options.map((o) => o.value) : undefined,
    deciders,
  });
  if (!outcome.ok) return { response_action: "errors", errors: { answer: outcome.text.slice(0, 150) } };
  await respond(meta.responseUrl, { response_type: "in_channel", replace_original: false, text: outcome.text });
  return { response_action: "clear" };
}

/** The original notice without its buttons, and what was decided. */
function decidedMessage(blocks: Array<Record<string, unknown>> | undefined, text: string) {
  const kept = (blocks ?? []).filter((b) => b.type !== "actions");
  return { replace_original: true, text, blocks: [...kept, { type: "context", elements: [{ type: "mrkdwn", text: `✅ ${escapeSlack(text)}` }] }] };
}

export function escapeSlack(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/** response_url is Slack's (hooks.slack.com), or the configured Slack API's origin (a proxy, a test receiver). */
function responseUrlAllowed(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const parsed = new URL(url);
  const api = getEnv().GATEHOUSE_SLACK_API_URL;
  if (api && parsed.origin === new URL(api).origin) return true;
  return parsed.protocol === "https:" && parsed.hostname === "hooks.slack.com";
}

async function respond(url: string | undefined, body: Record<string, unknown>) {
  if (!url || !responseUrlAllowed(url)) return;
  try {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000), redirect: "manual" });
    await response.body?.cancel().catch(() => undefined);
  } catch (error) {
    log.warn("could not answer a Slack interaction", { error: error instanceof Error ? error.message : String(error) });
  }
}

/** The modal for text: feedback, a question to the planner, or an answer (checkboxes for a multiple choice). */
async function openModal({ code, triggerId, metadata }: { code: ChatCode; triggerId?: string; metadata: Record<string, unknown> }) {
  const subject = await subjectOf(code);
  if (!subject || !triggerId) return;
  const channel = await findProjectChannel({ projectId: subject.projectId, kind: "slack" });
  if (!channel?.secret) throw new AppError("conflict:chat", "This project has no Slack channel (bot token) to open the form with.");
  let title = "Reject the plan";
  let label = "What should change?";
  let element: Record<string, unknown> = { type: "plain_text_input", action_id: "value", multiline: true, max_length: 3000 };
  if (code.verb === "ak") [title, label] = ["Ask the planner", "Your question"];
  if (code.verb === "bx") {
    const gate = await (await getDb()).query.gates.findFirst({ where: eq(gates.id, code.id) });
    [title, label] = ["Raise the budget", `Raise by (${budgetMetric(gate?.context).unit})`];
    element = { type: "plain_text_input", action_id: "value", initial_value: String(suggestedRaise(gate?.context).amount), max_length: 20 };
  }
  if (code.verb === "tx") {
    const db = await getDb();
    const row = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, code.id) });
    title = "Answer the question";
    label = (row?.question ?? "Your answer").slice(0, 2000);
    if (row?.responseType === "multiple_choice" && row.options?.length) {
      element = { type: "checkboxes", action_id: "value", options: row.options.slice(0, 10).map((o) => ({ text: { type: "plain_text", text: o.slice(0, 75) }, value: o })) };
    }
  }
  const client = new WebClient(decryptSecret(channel.secret), { slackApiUrl: getEnv().GATEHOUSE_SLACK_API_URL ?? "https://slack.com/api/", retryConfig: { retries: 0 }, timeout: 10_000 });
  await client.views.open({
    trigger_id: triggerId,
    view: {
      type: "modal",
      callback_id: MODAL_CALLBACK,
      private_metadata: JSON.stringify(metadata),
      title: { type: "plain_text", text: title },
      submit: { type: "plain_text", text: "Send" },
      close: { type: "plain_text", text: "Cancel" },
      blocks: [{ type: "input", block_id: "answer", label: { type: "plain_text", text: label.slice(0, 2000) }, element }],
    } as never,
  });
}
