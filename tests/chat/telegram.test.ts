import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { POST as webhook } from "@/app/api/telegram/webhook/[channelId]/route";
import { POST as registerWebhook } from "@/app/api/projects/[id]/notifications/telegram/webhook/route";
import { createLinkCode } from "@/lib/chat/link";
import { telegramSecretToken } from "@/lib/chat/telegram";
import { getDb, write } from "@/lib/db";
import { clarificationRequests, gates, workflowRuns } from "@/lib/db/schema";
import { attemptDelivery, planDeliveries } from "@/lib/notifications/dispatch";
import { appendEventsTx } from "@/lib/db/event-store";
import { createRun } from "@/lib/db/queries/runs";
import { resetEnvCache } from "@/lib/env";
import { newId } from "@/lib/ids";
import { saveProjectChannel } from "@/lib/notifications/store";
import { ADMIN, call, ORIGIN, runAtPlanGate } from "../api/helpers";
import { gateWorld, startHttpReceiver, type Received } from "../notifications/receivers";
import { chatDecisionsOf, gateRow, runAtBudgetGate } from "./helpers";

/*
 * Telegram, both ways: Update JSON as Telegram posts it, through grammY's webhookCallback, with the secret token the
 * webhook was registered with. grammY's Bot API calls (getMe, sendMessage, answerCallbackQuery …) go to a local
 * receiver through the bot's apiRoot; nothing reaches the internet.
 */

const TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const BOT_ID = 123456789;
type World = Awaited<ReturnType<typeof gateWorld>>;
let w: World;
let channelId: string;
let telegram: Awaited<ReturnType<typeof startHttpReceiver>>;
let nextMessageId = 100;

function answer(req: Received) {
  const method = req.path.split("/").at(-1);
  if (method === "getMe") {
    return { status: 200, json: { ok: true, result: { id: BOT_ID, is_bot: true, first_name: "Gatehouse", username: "gatehouse_test_bot", can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false } } };
  }
  if (method === "sendMessage") {
    const body = JSON.parse(req.body || "{}");
    return { status: 200, json: { ok: true, result: { message_id: nextMessageId++, date: 1_700_000_000, chat: { id: Number(body.chat_id), type: "private" }, text: body.text } } };
  }
  return { status: 200, json: { ok: true, result: true } };
}

beforeAll(async () => {
  telegram = await startHttpReceiver(answer);
  process.env.GATEHOUSE_TELEGRAM_API_ROOT = telegram.url;
  resetEnvCache();
  w = await gateWorld();
  const saved = await saveProjectChannel({ user: w.owner, projectId: w.project.id, kind: "telegram", input: { enabled: true, config: { chatId: "-1001234567890" }, secret: TOKEN } });
  channelId = saved.id;
});
afterAll(async () => {
  await telegram.close();
  delete process.env.GATEHOUSE_TELEGRAM_API_ROOT;
  resetEnvCache();
});

let updateId = 5000;
const person = (id: number, name: string) => ({ id, is_bot: false, first_name: name, username: name.toLowerCase(), language_code: "en" });

function commandUpdate(from: ReturnType<typeof person>, text: string) {
  const command = text.split(" ")[0]!;
  return { update_id: updateId++, message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: from.id, type: "private", first_name: from.first_name }, from, text, entities: [{ offset: 0, length: command.length, type: "bot_command" }] } };
}

function pressUpdate(from: ReturnType<typeof person>, data: string) {
  return {
    update_id: updateId++,
    callback_query: {
      id: `cb${updateId}`,
      from,
      chat_instance: "-8849152337294772231",
      data,
      message: { message_id: 77, date: Math.floor(Date.now() / 1000), chat: { id: -1001234567890, type: "supergroup", title: "approvals" }, from: { id: BOT_ID, is_bot: true, first_name: "Gatehouse" }, text: "A plan gate waits" },
    },
  };
}

function replyUpdate(from: ReturnType<typeof person>, text: string, repliedTo: { text: string; fromId: number }) {
  return {
    update_id: updateId++,
    message: {
      message_id: updateId,
      date: Math.floor(Date.now() / 1000),
      chat: { id: -1001234567890, type: "supergroup", title: "approvals" },
      from,
      text,
      reply_to_message: { message_id: 99, date: Math.floor(Date.now() / 1000), chat: { id: -1001234567890, type: "supergroup", title: "approvals" }, from: { id: repliedTo.fromId, is_bot: repliedTo.fromId === BOT_ID, first_name: "x" }, text: repliedTo.text },
    },
  };
}

async function send(update: unknown, { secret = telegramSecretToken(channelId), channel = channelId }: { secret?: string | null; channel?: string } = {}) {
  const before = telegram.requests.length;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (secret !== null) headers["x-telegram-bot-api-secret-token"] = secret;
  const response = await webhook(new Request(`${ORIGIN}/api/telegram/webhook/${channel}`, { method: "POST", headers, body: JSON.stringify(update) }), { params: Promise.resolve({ channelId: channel }) });
  const calls = telegram.requests.slice(before).map((r) => ({ method: r.path.split("/").at(-1)!, body: r.body ? JSON.parse(r.body) : {} }));
  return { status: response.status, calls };
}

const ann = person(111, "Ann");
const vic = person(222, "Vic");

async function link(user: World["approver"], from: ReturnType<typeof person>) {
  const { code } = await createLinkCode({ user });
  const linked = await send(commandUpdate(from, `/link ${code}`));
  expect(linked.status).toBe(200);
  expect(linked.calls.find((c) => c.method === "sendMessage")?.body.text).toMatch(new RegExp(`now acts as ${user.name}`));
}

describe("the Telegram webhook is verified", () => {
  it("a wrong or missing secret token is a 401, an unknown channel a 404; an unlinked press changes nothing", async () => {
    const update = pressUpdate(ann, `ap:${w.gateId}`);
    expect((await send(update, { secret: "wrong" })).status).toBe(401);
    expect((await send(update, { secret: null })).status).toBe(401);
    // Another channel's token does not open this one.
    expect((await send(update, { secret: telegramSecretToken("nch_other") })).status).toBe(401);
    expect((await send(update, { channel: "nch_nosuchchannel" })).status).toBe(404);
    const unlinked = await send(update);
    expect(unlinked.status).toBe(200);
    expect(unlinked.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: true, text: expect.stringMatching(/not linked/) });
    expect((await gateRow(w.gateId)).status).toBe("pending");
  });

  it("registering the webhook calls setWebhook with the secret token the route checks", async () => {
    process.env.GATEHOUSE_PUBLIC_URL = "https://gatehouse.example.com";
    resetEnvCache();
    try {
      const registered = await call(registerWebhook, { method: "POST", path: "/x", params: { id: w.project.id }, headers: ADMIN });
      expect(registered.status).toBe(200);
      const set = telegram.requests.filter((r) => r.path.endsWith("/setWebhook")).at(-1)!;
      expect(JSON.parse(set.body)).toMatchObject({ url: `https://gatehouse.example.com/api/telegram/webhook/${channelId}`, secret_token: telegramSecretToken(channelId) });
      expect(set.path).toBe(`/bot${TOKEN}/setWebhook`);
    } finally {
      delete process.env.GATEHOUSE_PUBLIC_URL;
      resetEnvCache();
    }
  });
});

describe("deciding from Telegram as the linked user", () => {
  it("link → approve by inline button: once, as that user, recorded with the chat; a second press says who decided when", async () => {
    await link(w.approver, ann);
    const pressed = await send(pressUpdate(ann, `ap:${w.gateId}`));
    expect(pressed.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: false, text: expect.stringMatching(/^Approved by Approver \(from Telegram\)/) });
    expect(pressed.calls.map((c) => c.method)).toContain("editMessageReplyMarkup");
    expect(await gateRow(w.gateId)).toMatchObject({ status: "approved", decidedBy: w.approver.id });
    expect(await chatDecisionsOf(w.runId)).toEqual([expect.objectContaining({ provider: "telegram", externalId: "111", place: "telegram chat -1001234567890", userId: w.approver.id })]);

    const again = await send(pressUpdate(ann, `ap:${w.gateId}`));
    expect(again.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: true, text: expect.stringMatching(/^Already decided by Approver at .* UTC: approved\.$/) });
    expect(await chatDecisionsOf(w.runId)).toHaveLength(1);
  });

  it("a viewer's press is refused with why", async () => {
    const { gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Viewer presses" });
    await link(w.viewer, vic);
    const pressed = await send(pressUpdate(vic, `ap:${gateId}`));
    expect(pressed.calls.find((c) => c.method === "answerCallbackQuery")?.body.text).toBe("Refused: you are a viewer on this project; only approvers and owners may decide.");
    expect((await gateRow(gateId)).status).toBe("pending");
  });

  it("reject asks for a reply; the reply to the bot's prompt rejects with it as feedback (a reply to someone else's message does not)", async () => {
    const { gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Reject by reply" });
    const pressed = await send(pressUpdate(ann, `rj:${gateId}`));
    const promptMessage = pressed.calls.find((c) => c.method === "sendMessage")!.body;
    expect(promptMessage).toMatchObject({ reply_markup: { force_reply: true } });
    expect((await gateRow(gateId)).status).toBe("pending");
    await send(replyUpdate(ann, "Use the other API", { text: promptMessage.text, fromId: 333 }));
    expect((await gateRow(gateId)).status).toBe("pending");
    const replied = await send(replyUpdate(ann, "Split it in two tasks", { text: promptMessage.text, fromId: BOT_ID }));
    expect(replied.calls.find((c) => c.method === "sendMessage")?.body.text).toMatch(/^Rejected by Approver/);
    expect(await gateRow(gateId)).toMatchObject({ status: "rejected", notes: "Split it in two tasks" });
  });

  it("a question's choice buttons answer it with the chosen option", async () => {
    const { id: runId } = await createRun({ projectId: w.project.id, userId: w.owner.id, request: "Ask me", config: {} });
    const clarificationId = newId("clr");
    await write(async (tx) => {
      await appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage: "planning" } }] as never);
      await tx.insert(clarificationRequests).values({ id: clarificationId, workflowRunId: runId, stage: "planning", question: "Which database?", responseType: "single_choice", options: ["SQLite", "Postgres"] });
      await appendEventsTx(tx, runId, [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId, stage: "planning", question: "Which database?" } }] as never);
    });
    await send(pressUpdate(ann, `ch:${clarificationId}:1`));
    const db = await getDb();
    expect(await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, clarificationId) })).toMatchObject({ status: "answered", response: "Postgres", answeredBy: w.approver.id });
  });
});

describe("a run paused by a timeout, from Telegram", () => {
  async function timedOut(request: string) {
    const run = await createRun({ projectId: w.project.id, userId: w.owner.id, request, config: {} });
    await write((tx) =>
      appendEventsTx(tx, run.id, [
        { type: "RUN_STARTED", payload: {} },
        { type: "STAGE_STARTED", payload: { stage: "implementation" } },
        { type: "RUN_PAUSED", payload: { reason: "timeout", message: "ran past 30 min", stage: "implementation" } },
      ] as never),
    );
    return run.id;
  }
  const status = async (runId: string) => (await (await getDb()).query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) }))?.status;

  it("Extend resumes it with more time once; Cancel the run on another cancels it; a second press on either is already decided", async () => {
    const extended = await timedOut("Extend me");
    const first = await send(pressUpdate(ann, `ex:${extended}`));
    expect(first.calls.find((c) => c.method === "answerCallbackQuery")?.body.text).toMatch(/^Extended by Approver \(from Telegram\)/);
    expect(await status(extended)).toBe("running");
    const again = await send(pressUpdate(ann, `ex:${extended}`));
    expect(again.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: true, text: expect.stringMatching(/^Already decided by Approver at .* UTC: the run is running\.$/) });

    const cancelled = await timedOut("Cancel me");
    const pressed = await send(pressUpdate(ann, `cn:${cancelled}`));
    expect(pressed.calls.find((c) => c.method === "answerCallbackQuery")?.body.text).toMatch(/^Cancelled by Approver \(from Telegram\)/);
    expect(await status(cancelled)).toBe("cancelled");
    const twice = await send(pressUpdate(ann, `cn:${cancelled}`));
    expect(twice.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: true, text: expect.stringMatching(/^Already decided by Approver at .* UTC: the run is cancelled\.$/) });
    expect(await chatDecisionsOf(cancelled)).toEqual([expect.objectContaining({ provider: "telegram", action: "cancel", subjectId: cancelled })]);
  });
});

describe("a budget gate from Telegram", () => {
  it("Raise by the suggested amount by inline button; Raise by… takes a typed amount as a reply; Cancel the run cancels it", async () => {
    const raised = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Over budget", metric: "minutes", used: 31, limit: 30 });
    const pressed = await send(pressUpdate(ann, `br:${raised.gateId}`));
    expect(pressed.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: false, text: expect.stringMatching(/^Budget raised by Approver \(from Telegram\)/) });
    expect(await gateRow(raised.gateId)).toMatchObject({ status: "approved", decision: "raise", payload: { raise: { minutes: 30 } }, decidedBy: w.approver.id });
    const again = await send(pressUpdate(ann, `br:${raised.gateId}`));
    expect(again.calls.find((c) => c.method === "answerCallbackQuery")?.body).toMatchObject({ show_alert: true, text: expect.stringMatching(/^Already decided by Approver at .* UTC: approved\.$/) });

    const typed = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Over budget again" });
    const prompted = await send(pressUpdate(ann, `bx:${typed.gateId}`));
    const promptMessage = prompted.calls.find((c) => c.method === "sendMessage")!.body;
    expect(promptMessage).toMatchObject({ reply_markup: { force_reply: true } });
    expect(promptMessage.text).toMatch(/how much to raise the budget by/);
    const bad = await send(replyUpdate(ann, "2.5", { text: promptMessage.text, fromId: BOT_ID }));
    expect(bad.calls.find((c) => c.method === "sendMessage")?.body.text).toBe("Type a whole number of tokens.");
    await send(replyUpdate(ann, "12,000", { text: promptMessage.text, fromId: BOT_ID }));
    expect(await gateRow(typed.gateId)).toMatchObject({ status: "approved", decision: "raise", payload: { raise: { tokens: 12000 } } });

    const cancelled = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Stop it" });
    await send(pressUpdate(ann, `bc:${cancelled.gateId}`));
    const db = await getDb();
    expect((await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, cancelled.runId) }))?.status).toBe("cancelled");
  });
});

describe("notices out carry the buttons", () => {
  it("a fix decision's Telegram notice has an inline keyboard; its callback_data decides when pressed", async () => {
    const { id: runId } = await createRun({ projectId: w.project.id, userId: w.owner.id, request: "Fix it", config: {} });
    const gateId = newId("gate");
    await write(async (tx) => {
      await appendEventsTx(tx, runId, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage: "validation" } }] as never);
      await tx.insert(gates).values({ id: gateId, workflowRunId: runId, gateNumber: 1, kind: "fix" });
      await appendEventsTx(tx, runId, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind: "fix" } }] as never);
    });
    const planned = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" });
    expect(await attemptDelivery({ deliveryId: planned.find((d) => d.kind === "telegram")!.id })).toMatchObject({ status: "delivered" });
    const sent = JSON.parse(telegram.requests.filter((r) => r.path.endsWith("/sendMessage")).at(-1)!.body);
    const keyboard = sent.reply_markup.inline_keyboard.flat() as Array<{ text: string; callback_data: string }>;
    expect(keyboard.map((k) => k.text)).toEqual(["Retry the fix", "Accept anyway", "Cancel the run"]);
    await send(pressUpdate(ann, keyboard[1]!.callback_data));
    expect(await gateRow(gateId)).toMatchObject({ status: "decided", decision: "accept", decidedBy: w.approver.id });
  });
});

describe("commands", () => {
  it("/run starts a run on the bot's project as the linked user; /waiting lists what waits", async () => {
    const started = await send(commandUpdate(ann, "/run Add a CONTRIBUTING file"));
    const text = started.calls.find((c) => c.method === "sendMessage")!.body.text as string;
    expect(text).toMatch(/^Run started on notify: http:\/\/127\.0\.0\.1:3000\/runs\/run_/);
    const db = await getDb();
    const run = await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, /runs\/(run_\w+)/.exec(text)![1]!) });
    expect(run).toMatchObject({ userId: w.approver.id, projectId: w.project.id, originalRequest: "Add a CONTRIBUTING file" });
    const { gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Waits for Ann" });
    const waiting = await send(commandUpdate(ann, "/waiting"));
    expect(waiting.calls.find((c) => c.method === "sendMessage")!.body.text).toContain(`#gate-${gateId}`);
  });
});
