import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as interactions } from "@/app/api/slack/interactions/route";
import { POST as telegramWebhook } from "@/app/api/telegram/webhook/[channelId]/route";
import { createLinkCode } from "@/lib/chat/link";
import { linkCommand } from "@/lib/chat/commands";
import { telegramSecretToken } from "@/lib/chat/telegram";
import { listEvents } from "@/lib/db/event-store";
import { resetEnvCache } from "@/lib/env";
import { saveProjectChannel } from "@/lib/notifications/store";
import { git, launch, newProject, until, waitForStatus, waitForWorkflow } from "../workflow/harness";
import { scriptedImplementer, useScriptedWorkflow } from "../workflow/model-server";
import { startHttpReceiver, type Received } from "../notifications/receivers";
import { ORIGIN } from "../api/helpers";
import { buttonBody, chatDecisionsOf, SIGNING_SECRET, slackRequest } from "./helpers";

/*
 * "Retry after an outage", pressed: the real workflow (embedded executor) pauses a run when the implementer's model
 * keeps answering 500; its paused-run notice goes out to Slack (chat.postMessage) or Telegram (sendMessage) with a
 * Retry button; the button the notice carries is pressed as Slack posts an interaction (signed v0) or as Telegram
 * posts a callback_query (through grammY's webhook callback); the run resumes from the failed step and completes.
 * The same press again is told it was already decided, and resumes nothing twice.
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };
const TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const BOT_ID = 123456789;
let chat: Awaited<ReturnType<typeof startHttpReceiver>>;
let messageId = 500;

/** Slack's Web API and response URLs under /slack, Telegram's Bot API under /tg. */
function answer(req: Received) {
  const method = req.path.split("/").at(-1);
  if (req.path.startsWith("/slack/api/")) return { status: 200, json: { ok: true, channel: "C1", ts: "1700000000.000100" } };
  if (method === "getMe") return { status: 200, json: { ok: true, result: { id: BOT_ID, is_bot: true, first_name: "Gatehouse", username: "gatehouse_test_bot" } } };
  if (method === "sendMessage") {
    const body = JSON.parse(req.body || "{}");
    return { status: 200, json: { ok: true, result: { message_id: messageId++, date: 1_700_000_000, chat: { id: Number(body.chat_id), type: "supergroup" }, text: body.text } } };
  }
  return { status: 200, json: { ok: true, result: true } };
}

beforeAll(async () => {
  chat = await startHttpReceiver(answer);
  process.env.SLACK_SIGNING_SECRET = SIGNING_SECRET;
  process.env.GATEHOUSE_SLACK_API_URL = `${chat.url}/slack/api/`;
  process.env.GATEHOUSE_TELEGRAM_API_ROOT = `${chat.url}/tg`;
  resetEnvCache();
});
afterAll(async () => {
  await chat.close();
  delete process.env.SLACK_SIGNING_SECRET;
  delete process.env.GATEHOUSE_SLACK_API_URL;
  delete process.env.GATEHOUSE_TELEGRAM_API_ROOT;
  resetEnvCache();
});

/** A run whose implementer's model is down: 500s past the model wrapper's retries pause it (model_outage). */
async function runPausedByOutage(projectId: string, request: string) {
  t.model.respond(() => ({ status: 500, headers: { "retry-after": "0.01" } }));
  const run = await launch(t.h.user, projectId, request, { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
  const paused = await waitForStatus(run.id, ["paused", "failed", "completed"]);
  expect(paused.status).toBe("paused");
  expect(paused.pauseReason).toMatchObject({ reason: "model_outage" });
  return run;
}

describe("Retry after a model outage, pressed in chat", () => {
  it("Slack: the paused notice's Retry button, pressed (signed interaction), resumes the run to completion; the same press again is already decided", async () => {
    const { project, repo } = await newProject(t.h.user);
    await saveProjectChannel({ user: t.h.user, projectId: project.id, kind: "slack", input: { enabled: true, config: { channel: "#runs" }, secret: "xoxb-1234-5678-abcdefghijkl", notices: "everything" } });
    const { code } = await createLinkCode({ user: t.h.user });
    expect(await linkCommand({ identity: { provider: "slack", externalId: "T0001:UOWNER", displayName: "owner" }, code })).toMatch(/^Linked/);

    const run = await runPausedByOutage(project.id, "Outage retried from Slack");
    // The notice notify-run posted: what to do, and the Retry button the press carries.
    const posted = await until(
      async () =>
        chat.requests
          .filter((r) => r.path === "/slack/api/chat.postMessage")
          .map((r) => new URLSearchParams(r.body))
          .find((f) => (f.get("text") ?? "").includes("paused (model outage)") && (f.get("blocks") ?? "").includes(run.id)),
      "the paused notice on Slack",
    );
    const blocks = JSON.parse(posted.get("blocks")!) as Array<{ type: string; text?: { text: string }; elements?: Array<{ text: { text: string }; value?: string }> }>;
    expect(JSON.stringify(blocks)).toContain("The model provider is unavailable. Retry when it is back");
    const retry = blocks.find((b) => b.type === "actions")!.elements!.find((e) => e.text.text === "Retry")!;
    expect(retry.value).toBe(`rt:${run.id}`);

    t.model.respond(scriptedImplementer("docs/requests/outage-retried-from-slack.md"));
    const press = async () => {
      const responseUrl = `${chat.url}/slack/respond/${crypto.randomUUID()}`;
      const response = await interactions(slackRequest("/api/slack/interactions", buttonBody({ user: "UOWNER", value: retry.value!, responseUrl, blocks })), { params: Promise.resolve({}) });
      expect(response.status).toBe(200);
      return chat.requests.filter((r) => r.path === new URL(responseUrl).pathname).map((r) => JSON.parse(r.body) as { text: string; replace_original?: boolean });
    };
    const first = await press();
    expect(first[0]).toMatchObject({ replace_original: true, text: expect.stringMatching(/^Retried by .+ \(from Slack\)/) });
    expect((await waitForStatus(run.id, ["completed", "failed"], 120_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    expect(git(repo, "show", `${run.branch}:docs/requests/outage-retried-from-slack.md`)).toContain("scripted model");

    const again = await press();
    expect(again[0]!.text).toMatch(/^Already decided by .+ at \d{4}-\d\d-\d\d \d\d:\d\d UTC: the run is completed\.$/);
    const events = await listEvents({ runId: run.id });
    expect(events.filter((e) => e.type === "RUN_RESUMED")).toEqual([expect.objectContaining({ payload: expect.objectContaining({ action: "retry", by: t.h.user.id }) })]);
    expect(await chatDecisionsOf(run.id)).toEqual([expect.objectContaining({ provider: "slack", action: "retry", subjectId: run.id })]);
  }, 240_000);

  it("Telegram: the paused notice's inline Retry, pressed (callback_query through grammY), resumes the run to completion; the same press again is already decided", async () => {
    const { project, repo } = await newProject(t.h.user);
    const channel = await saveProjectChannel({ user: t.h.user, projectId: project.id, kind: "telegram", input: { enabled: true, config: { chatId: "-1001234567890" }, secret: TOKEN, notices: "everything" } });
    const { code } = await createLinkCode({ user: t.h.user });
    const from = { id: 4711, is_bot: false, first_name: "Owner", username: "owner" };
    expect(await linkCommand({ identity: { provider: "telegram", externalId: String(from.id) }, code })).toMatch(/^Linked/);

    const run = await runPausedByOutage(project.id, "Outage retried from Telegram");
    const sent = await until(
      async () =>
        chat.requests
          .filter((r) => r.path.endsWith("/sendMessage"))
          .map((r) => JSON.parse(r.body) as { text: string; reply_markup?: { inline_keyboard: Array<Array<{ text: string; callback_data?: string }>> } })
          .find((m) => m.text.includes("paused (model outage)") && JSON.stringify(m.reply_markup ?? {}).includes(run.id)),
      "the paused notice on Telegram",
    );
    const retry = sent.reply_markup!.inline_keyboard.flat().find((b) => b.text === "Retry")!;
    expect(retry.callback_data).toBe(`rt:${run.id}`);

    t.model.respond(scriptedImplementer("docs/requests/outage-retried-from-telegram.md"));
    let updateId = 9000;
    const press = async () => {
      const before = chat.requests.length;
      const update = {
        update_id: updateId++,
        callback_query: {
          id: `cb${updateId}`,
          from,
          chat_instance: "-8849152337294772231",
          data: retry.callback_data,
          message: { message_id: 501, date: Math.floor(Date.now() / 1000), chat: { id: -1001234567890, type: "supergroup", title: "runs" }, from: { id: BOT_ID, is_bot: true, first_name: "Gatehouse" }, text: sent.text },
        },
      };
      const response = await telegramWebhook(
        new Request(`${ORIGIN}/api/telegram/webhook/${channel.id}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": telegramSecretToken(channel.id) },
          body: JSON.stringify(update),
        }),
        { params: Promise.resolve({ channelId: channel.id }) },
      );
      expect(response.status).toBe(200);
      return chat.requests
        .slice(before)
        .filter((r) => r.path.endsWith("/answerCallbackQuery"))
        .map((r) => JSON.parse(r.body) as { text: string; show_alert: boolean });
    };
    const first = await press();
    expect(first[0]).toMatchObject({ show_alert: false, text: expect.stringMatching(/^Retried by .+ \(from Telegram\)/) });
    expect((await waitForStatus(run.id, ["completed", "failed"], 120_000)).status).toBe("completed");
    expect(git(repo, "show", `${run.branch}:docs/requests/outage-retried-from-telegram.md`)).toContain("scripted model");

    const again = await press();
    expect(again[0]).toMatchObject({ show_alert: true, text: expect.stringMatching(/^Already decided by .+ at .+ UTC: the run is completed\.$/) });
    expect((await listEvents({ runId: run.id })).filter((e) => e.type === "RUN_RESUMED")).toHaveLength(1);
    expect(await chatDecisionsOf(run.id)).toEqual([expect.objectContaining({ provider: "telegram", action: "retry", subjectId: run.id })]);
  }, 240_000);
});
