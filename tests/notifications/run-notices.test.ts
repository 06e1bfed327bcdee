import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { write } from "@/lib/db";
import { appendEventsTx, listEvents } from "@/lib/db/event-store";
import { createRun } from "@/lib/db/queries/runs";
import { resetEnvCache } from "@/lib/env";
import { savePersonalChannel, saveProjectChannel } from "@/lib/notifications/store";
import { attemptDelivery, recordDeliveryFailure } from "@/lib/notifications/dispatch";
import { buildRunMessage, planRunNotice } from "@/lib/notifications/run-notices";
import { finishUnsuccessfully } from "@/lib/runs/steps/end";
import { runNoticeHook, type RunNotice } from "@/lib/runs/steps/notices";
import { PUT as putChannel } from "@/app/api/projects/[id]/notifications/[kind]/route";
import { ADMIN, call } from "../api/helpers";
import { gateWorld, startHttpReceiver, webhookSecret } from "./receivers";
import { runAtBudgetGate } from "../chat/helpers";

/*
 * Run notices (completed, failed, paused) on the channels that choose them: the level of each project channel and of
 * each person's own channel decides; delivered and logged like decision notices; the run's step hook emits them.
 */

type World = Awaited<ReturnType<typeof gateWorld>>;
let w: World;
let receiver: Awaited<ReturnType<typeof startHttpReceiver>>;
const secret = webhookSecret();

beforeAll(async () => {
  receiver = await startHttpReceiver((req) => (req.path.endsWith("/getMe") ? { status: 200, json: { ok: true, result: { id: 1, is_bot: true, first_name: "b" } } } : req.path.includes("sendMessage") ? { status: 200, json: { ok: true, result: { message_id: 1, date: 1, chat: { id: 1, type: "private" } } } } : { status: 200, json: { ok: true } }));
  process.env.GATEHOUSE_SLACK_API_URL = `${receiver.url}/slack/`;
  process.env.GATEHOUSE_TELEGRAM_API_ROOT = `${receiver.url}/tg`;
  resetEnvCache();
  w = await gateWorld();
  const save = (kind: "webhook" | "slack" | "telegram", config: Record<string, unknown>, secretValue: string, notices: "decisions" | "run_ends" | "everything") =>
    saveProjectChannel({ user: w.owner, projectId: w.project.id, kind, input: { enabled: true, config, secret: secretValue, notices } });
  await save("webhook", { url: `${receiver.url}/hooks` }, secret, "run_ends");
  await save("slack", { channel: "#runs" }, "xoxb-1234-5678-abcdefghijkl", "decisions");
  await save("telegram", { chatId: "-100200300" }, "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "everything");
  await savePersonalChannel({ user: w.approver, kind: "telegram", input: { enabled: true, config: { chatId: "4242" }, notices: "run_ends" } });
  await savePersonalChannel({ user: w.viewer, kind: "telegram", input: { enabled: true, config: { chatId: "5353" }, notices: "everything" } });
});
afterAll(async () => {
  await receiver.close();
  delete process.env.GATEHOUSE_SLACK_API_URL;
  delete process.env.GATEHOUSE_TELEGRAM_API_ROOT;
  resetEnvCache();
});

async function runIn(status: "running" | "paused" | "completed", pauseReason = "timeout") {
  const run = await createRun({ projectId: w.project.id, userId: w.owner.id, request: "Ship the release notes", config: {} });
  await write((tx) =>
    appendEventsTx(tx, run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "implementation" } },
      ...(status === "paused" ? [{ type: "RUN_PAUSED", payload: { reason: pauseReason, message: "implementation ran past 30 min", stage: "implementation" } }] : []),
      ...(status === "completed" ? [{ type: "RUN_COMPLETED", payload: {} }] : []),
    ] as never),
  );
  return run.id;
}

describe("choosing what a channel receives", () => {
  it("PUT saves notices and shows it back; a save that leaves it out keeps it; an unknown level is a 400", async () => {
    const path = `/api/projects/${w.project.id}/notifications/slack`;
    const params = { id: w.project.id, kind: "slack" };
    const saved = await call(putChannel, { method: "PUT", path, params, headers: ADMIN, body: { config: { channel: "#runs" }, notices: "run_ends" } });
    expect(saved.json.channel).toMatchObject({ notices: "run_ends" });
    const kept = await call(putChannel, { method: "PUT", path, params, headers: ADMIN, body: { config: { channel: "#runs" } } });
    expect(kept.json.channel).toMatchObject({ notices: "run_ends" });
    const bad = await call(putChannel, { method: "PUT", path, params, headers: ADMIN, body: { config: { channel: "#runs" }, notices: "sometimes" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/notices: must be "decisions", "run_ends" or "everything"/);
    await call(putChannel, { method: "PUT", path, params, headers: ADMIN, body: { config: { channel: "#runs" }, notices: "decisions" } });
  });
});

describe("who receives a run notice", () => {
  it("completed: channels at run_ends or everything, and deciders' own channels that chose it; not a decisions-only channel, not a viewer", async () => {
    const runId = await runIn("completed");
    const planned = await planRunNotice({ runId, kind: "completed", dispatchKey: `k1:${runId}` });
    expect(planned.map((p) => p.kind).sort()).toEqual(["telegram", "telegram", "webhook"]);
    // Planned again (a retried step): the same rows.
    expect(await planRunNotice({ runId, kind: "completed", dispatchKey: `k1:${runId}` })).toEqual(planned);

    for (const p of planned) expect(await attemptDelivery({ deliveryId: p.id })).toMatchObject({ status: "delivered" });
    const hook = receiver.requests.find((r) => r.path === "/hooks")!;
    const headers = Object.fromEntries(Object.entries(hook.headers).map(([k, v]) => [k, String(v)]));
    const payload = new Webhook(secret).verify(hook.body, headers) as { data: { title: string; text: string; subject: unknown; reason: string } };
    expect(payload.data).toMatchObject({ reason: "completed", subject: { type: "run", id: runId, kind: "completed" } });
    expect(payload.data.title).toBe('[notify] Run "Ship the release notes" completed');
    expect(payload.data.text).toMatch(/Branch: autonomous\/run_\w+-ship-the-release-notes\nCost: \$0\.0000\nOpen: http:\/\/127\.0\.0\.1:3000\/runs\/run_/);
    const chats = receiver.requests.filter((r) => r.path.endsWith("/sendMessage")).map((r) => JSON.parse(r.body).chat_id);
    expect(chats.sort()).toEqual(["-100200300", "4242"]);
  });

  it("paused: only channels at everything, with what to do and Extend / Cancel buttons after a timeout", async () => {
    const runId = await runIn("paused");
    const planned = await planRunNotice({ runId, kind: "paused", dispatchKey: `k2:${runId}` });
    expect(planned.map((p) => p.kind)).toEqual(["telegram"]);
    const message = await buildRunMessage({ runId, kind: "paused" });
    expect(message.title).toBe('[notify] Run "Ship the release notes" paused (timeout)');
    expect(message.text).toContain("What to do: The stage ran past its time limit. Extend it to give it more time, or Cancel.");
    expect(message.buttons?.map((b) => [b.label, b.code])).toEqual([
      ["Extend", `ex:${runId}`],
      ["Cancel the run", `cn:${runId}`],
    ]);
    const outage = await runIn("paused", "model_outage");
    expect((await buildRunMessage({ runId: outage, kind: "paused" })).buttons?.[0]).toMatchObject({ label: "Retry", code: `rt:${outage}` });
  });

  it("a budget stop: opening the budget gate emits a paused notice (reason budget) with what to do, the gate's link and its ways on as buttons", async () => {
    const { runId, gateId, sent } = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Ship the release notes", used: 6200, limit: 5000 });
    expect(sent).toEqual([{ runId, kind: "paused", key: "impl:1:budget", gateId }]);
    const planned = await planRunNotice({ runId, kind: "paused", gateId, dispatchKey: `k4:${runId}` });
    expect(planned.map((p) => p.kind)).toEqual(["telegram"]);
    const message = await buildRunMessage({ runId, kind: "paused", gateId });
    expect(message.title).toBe('[notify] Run "Ship the release notes" paused (budget)');
    expect(message.text).toContain("Why: The implementation stage used 6200 tokens, over its budget of 5000.");
    expect(message.text).toContain("What to do: Raise the budget (by the amount shown, or type one), let the task in progress finish and stop (implementation only), or Cancel the run.");
    expect(message.url).toBe(`http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
    expect(message.text).toContain(`Open: http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
    expect(message.buttons?.map((b) => [b.label, b.code])).toEqual([
      ["Raise by 5000 tokens", `br:${gateId}`],
      ["Raise by…", `bx:${gateId}`],
      ["Finish this task, then stop", `bf:${gateId}`],
      ["Cancel the run", `bc:${gateId}`],
    ]);
    // Delivered on Telegram with the gate's buttons as an inline keyboard.
    expect(await attemptDelivery({ deliveryId: planned[0]!.id })).toMatchObject({ status: "delivered" });
    const sentMessage = JSON.parse(receiver.requests.filter((r) => r.path.endsWith("/sendMessage")).at(-1)!.body);
    expect(sentMessage.reply_markup.inline_keyboard.flat().map((b: { callback_data?: string }) => b.callback_data).filter(Boolean)).toEqual([`br:${gateId}`, `bx:${gateId}`, `bf:${gateId}`, `bc:${gateId}`]);
    // Planning's budget has no task to finish: no such button; a money budget is raised in dollars.
    const planning = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Plan it", stage: "planning", metric: "costUsd", used: 0.75, limit: 0.5 });
    expect((await buildRunMessage({ runId: planning.runId, kind: "paused", gateId: planning.gateId })).buttons?.map((b) => b.label)).toEqual(["Raise by $0.5", "Raise by…", "Cancel the run"]);
  });

  it("failed: the step hook emits it when a run fails; the notice says why; a failed delivery is recorded on the run", async () => {
    const runId = await runIn("running");
    const sent: RunNotice[] = [];
    const before = runNoticeHook.send;
    runNoticeHook.send = async (n) => void sent.push(n);
    try {
      await finishUnsuccessfully({ runId, reason: "the implementer gave up: tests keep failing", stepKey: "failure" });
    } finally {
      runNoticeHook.send = before;
    }
    expect(sent).toEqual([{ runId, kind: "failed", key: "failure" }]);
    const message = await buildRunMessage({ runId, kind: "failed" });
    expect(message.text).toContain("Why: the implementer gave up: tests keep failing (in implementation)");
    const [webhook] = (await planRunNotice({ runId, kind: "failed", dispatchKey: `k3:${runId}` })).filter((p) => p.kind === "webhook");
    await recordDeliveryFailure({ deliveryId: webhook!.id });
    const failedEvent = (await listEvents({ runId })).find((e) => e.type === "NOTIFICATION_FAILED");
    expect(failedEvent?.payload).toMatchObject({ subject: { type: "run", id: runId }, reason: "failed", channel: "webhook" });
  });
});
