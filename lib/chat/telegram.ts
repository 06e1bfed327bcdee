import crypto from "node:crypto";
import { and, eq, isNotNull } from "drizzle-orm";
import { Api, Bot, webhookCallback, type Context } from "grammy";
import type { UserFromGetMe } from "grammy/types";
import { getDb } from "@/lib/db";
import { notificationChannels } from "@/lib/db/schema";
import { discardBody, readUnverifiedBody } from "@/lib/body";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { decryptSecret, derivedToken } from "@/lib/notifications/crypto";
import { parseCode, type ChatCode } from "@/lib/notifications/buttons";
import { applyChatAction, type ChatDeciders } from "./actions";
import { linkCommand, runCommand, waitingCommand } from "./commands";
import type { ChatIdentity } from "./link";

/*
 * Telegram, inbound: a project's bot (its Telegram channel) takes updates on POST /api/telegram/webhook/:channelId.
 * The webhook is registered with setWebhook's secret_token, derived per channel from the server's key; Telegram sends
 * it back in X-Telegram-Bot-Api-Secret-Token, checked (constant time) before the body is read. Updates go through
 * grammY's webhookCallback: inline keyboard presses decide, replies carry text (feedback, a question, an answer), and
 * /link, /run, /waiting are commands.
 */

const PURPOSE = "telegram-webhook";
const REF = /\[ref ([a-z]{2}:(?:gate|clr|run)_[0-9a-z]{10,40})\]/;

export const telegramSecretToken = (channelId: string) => derivedToken({ purpose: PURPOSE, id: channelId });

const apiRoot = () => getEnv().GATEHOUSE_TELEGRAM_API_ROOT ?? "https://api.telegram.org";

async function telegramChannel(channelId: string) {
  const db = await getDb();
  const channel = await db.query.notificationChannels.findFirst({
    where: and(eq(notificationChannels.id, channelId), eq(notificationChannels.kind, "telegram"), isNotNull(notificationChannels.projectId)),
  });
  if (!channel?.secret || !channel.projectId) return null;
  return { ...channel, projectId: channel.projectId, token: decryptSecret(channel.secret) };
}

/** Register the project's bot's webhook with Telegram (setWebhook, with its secret_token). Owners only. */
export async function registerTelegramWebhook({ user, projectId }: { user: SessionUser; projectId: string }): Promise<{ url: string }> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const db = await getDb();
  const row = await db.query.notificationChannels.findFirst({ where: and(eq(notificationChannels.projectId, projectId), eq(notificationChannels.kind, "telegram")) });
  const channel = row ? await telegramChannel(row.id) : null;
  if (!channel) throw new AppError("conflict:chat", "This project has no Telegram channel (bot token): save one first.");
  const url = `${getEnv().publicUrl}/api/telegram/webhook/${channel.id}`;
  if (!url.startsWith("https://")) {
    throw new AppError("conflict:chat", `Telegram only calls https webhooks; GATEHOUSE_PUBLIC_URL is ${getEnv().publicUrl}. Set it to this server's public https address.`);
  }
  await new Api(channel.token, { apiRoot: apiRoot() }).setWebhook(url, { secret_token: telegramSecretToken(channel.id), allowed_updates: ["message", "callback_query"] });
  return { url };
}

/** getMe once per bot and process: a webhook's bot needs its own identity, not a round trip per update. */
const botInfos = new Map<string, UserFromGetMe>();

async function botFor(token: string): Promise<Bot> {
  let info = botInfos.get(token);
  if (!info) {
    info = await new Api(token, { apiRoot: apiRoot() }).getMe();
    botInfos.set(token, info);
  }
  return new Bot(token, { botInfo: info, client: { apiRoot: apiRoot() } });
}

const identityOf = (ctx: Context): ChatIdentity | null =>
  ctx.from ? { provider: "telegram", externalId: String(ctx.from.id), displayName: ctx.from.username ?? ctx.from.first_name } : null;

const placeOf = (ctx: Context) => `telegram chat ${ctx.chat?.id ?? "?"}`;

function prompt(code: ChatCode): string {
  if (code.verb === "rj") return "Reply to this message with your feedback: what should change?";
  if (code.verb === "ak") return "Reply to this message with your question to the planner.";
  if (code.verb === "bx") return "Reply to this message with how much to raise the budget by (a number, in the unit the notice names).";
  return "Reply to this message with your answer.";
}

/** The handlers of one update; the bot is made per request (its token is the channel's). */
function wire(bot: Bot, { projectId, deciders }: { projectId: string; deciders: ChatDeciders }) {
  bot.command(["link", "start"], async (ctx) => {
    const identity = identityOf(ctx);
    if (!identity) return;
    // /start <code> is what a t.me/<bot>?start=<code> link sends.
    if (ctx.message?.text?.startsWith("/start") && !ctx.match) return void (await ctx.reply("Send /link <code> with the code from Gatehouse → Settings → Chat accounts."));
    await ctx.reply(await linkCommand({ identity, code: String(ctx.match ?? "") }));
  });
  bot.command("run", async (ctx) => {
    const identity = identityOf(ctx);
    if (!identity) return;
    const request = String(ctx.match ?? "");
    await ctx.reply(request.trim() ? await runCommand({ identity, project: { id: projectId }, request, deciders }) : "Usage: /run <what the run should do>");
  });
  bot.command("waiting", async (ctx) => {
    const identity = identityOf(ctx);
    if (identity) await ctx.reply((await waitingCommand({ identity })).text, { link_preview_options: { is_disabled: true } });
  });
  bot.on("callback_query:data", async (ctx) => {
    const identity = identityOf(ctx);
    const code = parseCode(ctx.callbackQuery.data);
    if (!identity || !code) return void (await ctx.answerCallbackQuery());
    if (code.verb === "rj" || code.verb === "ak" || code.verb === "tx" || code.verb === "bx") {
      await ctx.answerCallbackQuery();
      await ctx.reply(`${prompt(code)} [ref ${ctx.callbackQuery.data}]`, { reply_markup: { force_reply: true, selective: true } });
      return;
    }
    const outcome = await applyChatAction({ identity, place: placeOf(ctx), code, deciders });
    await ctx.answerCallbackQuery({ text: outcome.text.slice(0, 200), show_alert: !outcome.ok });
    if (outcome.ok) {
      await ctx.editMessageReplyMarkup({ reply_markup: { inline_keyboard: [] } }).catch(() => undefined);
      await ctx.reply(outcome.text);
    }
  });
  bot.on("message:text", async (ctx) => {
    const identity = identityOf(ctx);
    const replied = ctx.message.reply_to_message;
    // Only a reply to one of this bot's own prompts carries a decision.
    const ref = replied?.from?.id === ctx.me.id ? REF.exec(replied.text ?? "") : null;
    const code = ref ? parseCode(ref[1]!) : null;
    if (!identity || !code) return;
    const outcome = await applyChatAction({ identity, place: placeOf(ctx), code, text: ctx.message.text, deciders });
    await ctx.reply(outcome.text, { reply_parameters: { message_id: ctx.message.message_id } });
  });
}

/** One update from Telegram for a project's bot: 404 unknown channel, 401 wrong secret token, 413 too large. */
export async function handleTelegramWebhook({ request, channelId, deciders }: { request: Request; channelId: string; deciders: ChatDeciders }): Promise<Response> {
  const channel = await telegramChannel(channelId);
  if (!channel) {
    await discardBody(request);
    throw new AppError("not_found:chat", "No Telegram bot is configured under this webhook.");
  }
  const expected = Buffer.from(telegramSecretToken(channel.id));
  const given = Buffer.from(request.headers.get("x-telegram-bot-api-secret-token") ?? "");
  if (expected.length !== given.length || !crypto.timingSafeEqual(expected, given)) {
    await discardBody(request);
    throw new AppError("unauthorized:chat", "The X-Telegram-Bot-Api-Secret-Token header is missing or wrong.");
  }
  const body = await readUnverifiedBody({ request, limit: getEnv().GATEHOUSE_CHAT_MAX_BYTES, surface: "chat", what: "The Telegram update (GATEHOUSE_CHAT_MAX_BYTES)" });
  const bot = await botFor(channel.token);
  wire(bot, { projectId: channel.projectId, deciders });
  const handle = webhookCallback(bot, "std/http", { secretToken: telegramSecretToken(channel.id), onTimeout: "return", timeoutMilliseconds: 25_000 });
  return handle(new Request(request.url, { method: "POST", headers: request.headers, body: new Uint8Array(body) }));
}

