import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { getClient, getDb } from "@/lib/db";
import { notificationDeliveries } from "@/lib/db/schema";
import { resetEnvCache } from "@/lib/env";
import { listEvents } from "@/lib/db/event-store";
import { saveProjectChannel, savePersonalChannel, listProjectChannels } from "@/lib/notifications/store";
import { attemptDelivery, buildMessage, planDeliveries, recordDeliveryFailure, sendTest } from "@/lib/notifications/dispatch";
import { timeOut } from "@/lib/runs/deadlines";
import { users } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { decryptSecret } from "@/lib/notifications/crypto";
import { gateWorld, startHttpReceiver, startSmtp, webhookSecret } from "./receivers";

type World = Awaited<ReturnType<typeof gateWorld>>;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
  delete process.env.GATEHOUSE_SLACK_API_URL;
  delete process.env.GATEHOUSE_TELEGRAM_API_ROOT;
  resetEnvCache();
});

let w: World;
beforeAll(async () => {
  w = await gateWorld();
});

async function deliveryRow(id: string) {
  const db = await getDb();
  return (await db.query.notificationDeliveries.findFirst({ where: eq(notificationDeliveries.id, id) }))!;
}

/** A fresh world per test, so each test's project has only the channel it configures. */
async function fresh() {
  w = await gateWorld();
  return w;
}

describe("each channel against its real protocol", () => {
  it("webhook: a Standard Webhooks request whose signature verifies with standardwebhooks' Webhook.verify", async () => {
    const { owner, project, runId, gateId } = await fresh();
    const receiver = await startHttpReceiver(() => ({ status: 204 }));
    closers.push(receiver.close);
    const secret = webhookSecret();
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: `${receiver.url}/hooks/gatehouse` }, secret } });

    const planned = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" });
    expect(planned).toEqual([{ id: expect.any(String), kind: "webhook" }]);
    expect(await attemptDelivery({ deliveryId: planned[0]!.id })).toMatchObject({ status: "delivered" });

    expect(receiver.requests).toHaveLength(1);
    const [req] = receiver.requests;
    expect(req!.path).toBe("/hooks/gatehouse");
    const headers = Object.fromEntries(Object.entries(req!.headers).map(([k, v]) => [k, String(v)]));
    const payload = new Webhook(secret).verify(req!.body, headers) as { type: string; data: { url: string; subject: { id: string }; reason: string; runId: string } };
    expect(payload.type).toBe("decision.notify");
    expect(payload.data).toMatchObject({ runId, reason: "opened", subject: { type: "gate", id: gateId, kind: "plan" } });
    expect(payload.data.url).toBe(`http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
    // Signed with this secret only: another secret, or an altered body, does not verify.
    expect(() => new Webhook(webhookSecret()).verify(req!.body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(req!.body.replace("opened", "escalated"), headers)).toThrow();
    const row = await deliveryRow(planned[0]!.id);
    expect(row).toMatchObject({ status: "delivered", attempts: 1, target: receiver.url.replace("http://", "") });
    expect(headers["webhook-id"]).toBe(row.messageId);
  });

  it("email: sent over SMTP with the stored password, to the project's list and a decider's own address, parsed with mailparser", async () => {
    const { owner, approver, viewer, project, runId, gateId } = await fresh();
    const smtp = await startSmtp({ username: "gatehouse", password: "smtp-password-42" });
    closers.push(smtp.close);
    await saveProjectChannel({
      user: owner,
      projectId: project.id,
      kind: "email",
      input: { enabled: true, config: { host: "127.0.0.1", port: smtp.port, secure: false, username: "gatehouse", from: "gatehouse@example.com", to: ["team@example.com"] }, secret: "smtp-password-42" },
    });
    await savePersonalChannel({ user: approver, kind: "email", input: { enabled: true, config: { address: "approver.home@example.com" } } });
    // A viewer may not decide: their personal channel is never used for a gate.
    await savePersonalChannel({ user: viewer, kind: "email", input: { enabled: true, config: { address: "viewer@example.com" } } });

    const planned = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "reminder" });
    expect(planned.map((p) => p.kind)).toEqual(["email", "email"]);
    for (const p of planned) expect(await attemptDelivery({ deliveryId: p.id })).toMatchObject({ status: "delivered" });

    expect(smtp.logins).toEqual([
      { username: "gatehouse", password: "smtp-password-42" },
      { username: "gatehouse", password: "smtp-password-42" },
    ]);
    expect(smtp.messages.map((m) => m.envelopeTo).sort()).toEqual([["approver.home@example.com"], ["team@example.com"]]);
    const mail = smtp.messages[0]!.mail;
    expect(mail.from?.text).toBe("gatehouse@example.com");
    expect(mail.subject).toBe(`[notify] A plan gate on "Add a changelog entry" is still waiting for a decision (reminder)`);
    expect(mail.text).toContain(`Open: http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
    expect(mail.headers.get("x-gatehouse-run")).toBe(runId);
  });

  it("Slack: chat.postMessage through @slack/web-api at the configured API URL, with the bot token and a link", async () => {
    const { owner, project, runId, gateId } = await fresh();
    const slack = await startHttpReceiver(() => ({ status: 200, json: { ok: true, channel: "C1", ts: "1700000000.000100" } }));
    closers.push(slack.close);
    process.env.GATEHOUSE_SLACK_API_URL = `${slack.url}/api/`;
    resetEnvCache();
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "slack", input: { enabled: true, config: { channel: "#approvals" }, secret: "xoxb-1111-2222-abcdefabcdef" } });

    const planned = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "escalated" });
    expect(await attemptDelivery({ deliveryId: planned[0]!.id })).toMatchObject({ status: "delivered", detail: "ts 1700000000.000100" });

    expect(slack.requests).toHaveLength(1);
    const [req] = slack.requests;
    expect(req!.method).toBe("POST");
    expect(req!.path).toBe("/api/chat.postMessage");
    expect(req!.headers.authorization).toBe("Bearer xoxb-1111-2222-abcdefabcdef");
    const body = String(req!.headers["content-type"]).includes("json")
      ? (JSON.parse(req!.body) as Record<string, unknown>)
      : Object.fromEntries(new URLSearchParams(req!.body));
    expect(body.channel).toBe("#approvals");
    expect(String(body.text)).toContain(`http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
    expect(String(body.text)).toContain("was escalated to you");
    const blocks = typeof body.blocks === "string" ? JSON.parse(body.blocks) : body.blocks;
    expect(JSON.stringify(blocks)).toContain(`"url":"http://127.0.0.1:3000/runs/${runId}#gate-${gateId}"`);
  });

  it("Telegram: sendMessage through grammY at the configured API root, to the project chat and a decider's own chat", async () => {
    const { owner, approver, project, runId, gateId } = await fresh();
    let next = 1;
    const telegram = await startHttpReceiver((req) => ({
      status: 200,
      json: { ok: true, result: { message_id: next++, date: 1700000000, chat: { id: Number(JSON.parse(req.body).chat_id), type: "group" }, text: "x" } },
    }));
    closers.push(telegram.close);
    process.env.GATEHOUSE_TELEGRAM_API_ROOT = telegram.url;
    resetEnvCache();
    const token = "123456789:AAH_abcdefghijklmnopqrstuvwxyz012345";
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "telegram", input: { enabled: true, config: { chatId: "-1001234567890" }, secret: token } });
    await savePersonalChannel({ user: approver, kind: "telegram", input: { enabled: true, config: { chatId: "4242" } } });

    const planned = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" });
    for (const p of planned) expect(await attemptDelivery({ deliveryId: p.id })).toMatchObject({ status: "delivered" });

    expect(telegram.requests.map((r) => r.path)).toEqual([`/bot${token}/sendMessage`, `/bot${token}/sendMessage`]);
    const bodies = telegram.requests.map((r) => JSON.parse(r.body) as { chat_id: string | number; text: string });
    expect(bodies.map((b) => String(b.chat_id)).sort()).toEqual(["-1001234567890", "4242"]);
    expect(bodies[0]!.text).toContain(`Open: http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
  });
});

describe("failures and secrets", () => {
  it("a failing endpoint: each attempt is counted with its error (the secret redacted), then the failure is logged and put on the run", async () => {
    const { owner, project, runId, gateId } = await fresh();
    const telegram = await startHttpReceiver(() => ({ status: 500, json: { ok: false, error_code: 500, description: "Internal Server Error" } }));
    closers.push(telegram.close);
    process.env.GATEHOUSE_TELEGRAM_API_ROOT = telegram.url;
    resetEnvCache();
    const token = "987654321:AAH_zyxwvutsrqponmlkjihgfedcba543210";
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "telegram", input: { enabled: true, config: { chatId: "-100777" }, secret: token } });
    const [planned] = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" });

    await expect(attemptDelivery({ deliveryId: planned!.id })).rejects.toThrow(/telegram delivery .* failed/);
    await expect(attemptDelivery({ deliveryId: planned!.id })).rejects.toThrow();
    const pending = await deliveryRow(planned!.id);
    expect(pending).toMatchObject({ status: "pending", attempts: 2 });
    expect(pending.lastError).toBe("Call to 'sendMessage' failed! (500: Internal Server Error)");
    expect(telegram.requests.map((r) => r.path)).toEqual([`/bot${token}/sendMessage`, `/bot${token}/sendMessage`]);
    expect(pending.lastError).not.toContain(token);

    expect(await recordDeliveryFailure({ deliveryId: planned!.id })).toEqual({ recorded: true });
    expect((await deliveryRow(planned!.id)).status).toBe("failed");
    const events = await listEvents({ runId });
    const failed = events.filter((e) => e.type === "NOTIFICATION_FAILED");
    expect(failed).toHaveLength(1);
    expect(failed[0]!.payload).toMatchObject({ deliveryId: planned!.id, channel: "telegram", personal: false, attempts: 2, subject: { type: "gate", id: gateId } });
    expect(JSON.stringify(failed[0]!.payload)).not.toContain(token);
  });

  it("secrets are stored encrypted (no plaintext in the database) and never come back from the store", async () => {
    const { owner, project } = await fresh();
    const secret = webhookSecret();
    const saved = await saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: "https://hooks.example.com/a" }, secret } });
    expect(saved.secret).toBe("set");
    expect(JSON.stringify(await listProjectChannels({ user: owner, projectId: project.id }))).not.toContain(secret.slice(6, 20));

    const client = await getClient();
    const rows = await client.execute({ sql: "SELECT secret, config FROM notification_channels WHERE project_id = ?", args: [project.id] });
    const stored = String(rows.rows[0]!.secret);
    expect(stored).toMatch(/^v1\./);
    expect(stored).not.toContain(secret);
    expect(stored).not.toContain(secret.slice(6));
    expect(decryptSecret(stored)).toBe(secret);
    // Tampering is detected (GCM), not decrypted to garbage.
    const parts = stored.split(".");
    parts[3] = Buffer.from("tampered").toString("base64url");
    expect(() => decryptSecret(parts.join("."))).toThrow(/cannot be decrypted/);

    // Saving again without a secret keeps the stored one.
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: false, config: { url: "https://hooks.example.com/b" } } });
    const again = await client.execute({ sql: "SELECT secret FROM notification_channels WHERE project_id = ?", args: [project.id] });
    expect(decryptSecret(String(again.rows[0]!.secret))).toBe(secret);
  });

  it("bad channel config is a 400 that names the field; a channel without its required secret is refused", async () => {
    const { owner, project } = await fresh();
    await expect(
      saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: "ftp://x" }, secret: webhookSecret() } }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/^config\.url: must be an http\(s\) URL/) });
    await expect(
      saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: "https://x.example.com" }, secret: "not-a-secret" } }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/^secret: must be whsec_/) });
    await expect(
      saveProjectChannel({ user: owner, projectId: project.id, kind: "slack", input: { enabled: true, config: { channel: "#x" } } }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/^secret: required for a slack channel/) });
    expect(await listProjectChannels({ user: owner, projectId: project.id })).toEqual([]);
  });

  it("recipients narrow personal notices to the named deciders; a project without the kind's channel sends no personal notice", async () => {
    const { owner, approver, project, runId, gateId } = await fresh();
    await savePersonalChannel({ user: approver, kind: "telegram", input: { enabled: true, config: { chatId: "5151" } } });
    // No project Telegram bot: nothing to send the personal chat through.
    expect(await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" })).toEqual([]);
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "telegram", input: { enabled: false, config: { chatId: "-1" }, secret: "123456789:AAH_abcdefghijklmnopqrstuvwxyz012345" } });
    // The project's bot is disabled: the project channel and the personal ones through it stay quiet.
    expect(await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" })).toEqual([]);
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "telegram", input: { enabled: true, config: { chatId: "-1" } } });
    expect((await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" })).length).toBe(2);
    expect((await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "escalated", recipients: ["usr_someone_else"] })).length).toBe(1);
    expect((await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "escalated", recipients: [approver.id] })).length).toBe(2);
  });

  it("planning the same notify event again (a retried step) writes no second delivery", async () => {
    const { owner, project, runId, gateId } = await fresh();
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: "http://127.0.0.1:9/x" }, secret: webhookSecret() } });
    const first = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened", dispatchKey: "evt-1" });
    const again = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened", dispatchKey: "evt-1" });
    expect(again).toEqual(first);
    const other = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "reminder", dispatchKey: "evt-2" });
    expect(other[0]!.id).not.toBe(first[0]!.id);
    const db = await getDb();
    expect(await db.select().from(notificationDeliveries).where(eq(notificationDeliveries.workflowRunId, runId))).toHaveLength(2);
  });

  it("send a test: one attempt now, its outcome answered (a refused connection is reported, not thrown)", async () => {
    const { owner, project } = await fresh();
    await expect(sendTest({ user: owner, projectId: project.id, kind: "webhook" })).rejects.toMatchObject({ status: 409 });
    const receiver = await startHttpReceiver(() => ({ status: 200 }));
    closers.push(receiver.close);
    const secret = webhookSecret();
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: receiver.url }, secret } });
    expect(await sendTest({ user: owner, projectId: project.id, kind: "webhook" })).toEqual({ ok: true, detail: "HTTP 200" });
    const headers = Object.fromEntries(Object.entries(receiver.requests[0]!.headers).map(([k, v]) => [k, String(v)]));
    expect(new Webhook(secret).verify(receiver.requests[0]!.body, headers)).toMatchObject({ data: { title: expect.stringContaining("Test notification") } });
    await saveProjectChannel({ user: owner, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: "http://127.0.0.1:9/nothing" } } });
    const refused = await sendTest({ user: owner, projectId: project.id, kind: "webhook" });
    expect(refused.ok).toBe(false);
    expect(refused.detail).toMatch(/fetch failed|ECONNREFUSED/);
  });
});

describe("deadlines: reminders, escalation to a backup approver, defaults", () => {
  const at = Date.parse("2030-01-02T03:04:05Z");

  it("an escalation to the viewers reaches a viewer's own email, saying so with the deadline and linking to the gate; before it and for an outsider, nothing", async () => {
    const deadline = { at, reminders: [], onTimeout: { action: "escalate" as const, to: { role: "viewer" as const } } };
    const { owner, viewer, project, runId, gateId } = await gateWorld({ deadline });
    const smtp = await startSmtp({ username: "gatehouse", password: "smtp-password-7" });
    closers.push(smtp.close);
    await saveProjectChannel({
      user: owner,
      projectId: project.id,
      kind: "email",
      input: {
        enabled: true,
        config: { host: "127.0.0.1", port: smtp.port, secure: false, username: "gatehouse", from: "gatehouse@example.com", to: ["team@example.com"] },
        secret: "smtp-password-7",
      },
    });
    await savePersonalChannel({ user: viewer, kind: "email", input: { enabled: true, config: { address: "viewer.backup@example.com" } } });
    const outsiderId = newId("usr");
    await (await getDb()).insert(users).values({ id: outsiderId, name: "Outsider", email: `outsider-${outsiderId}@example.com` });
    await savePersonalChannel({ user: { id: outsiderId, name: "Outsider", via: "api-token" }, kind: "email", input: { enabled: true, config: { address: "outsider@example.com" } } });
    const subject = { type: "gate" as const, id: gateId };

    // Before the deadline: a reminder says when it is due, and the viewer (who may not decide yet) is not sent it,
    // even when named.
    const reminder = await planDeliveries({ runId, subject, reason: "reminder", recipients: [viewer.id] });
    expect(reminder).toHaveLength(1);
    expect(await attemptDelivery({ deliveryId: reminder[0]!.id })).toMatchObject({ status: "delivered" });
    expect(smtp.messages.map((m) => m.envelopeTo)).toEqual([["team@example.com"]]);
    expect(smtp.messages[0]!.mail.subject).toBe(`[notify] A plan gate on "Add a changelog entry" is still waiting for a decision (reminder) (due 2030-01-02 03:04:05 UTC)`);
    expect(smtp.messages[0]!.mail.text).toContain("Decide by 2030-01-02 03:04:05 UTC; then it escalates to a backup approver.");

    // The deadline passes: escalated to the viewers, as the workflow's timeout step does; its recipients are notified.
    const outcome = await timeOut({ runId, stepKey: `test:${gateId}:timeout`, subject, deadline });
    expect(outcome).toMatchObject({ kind: "escalated", recipients: expect.arrayContaining([viewer.id]) });
    const recipients = [...(outcome as { recipients: string[] }).recipients, outsiderId];
    const escalated = await planDeliveries({ runId, subject, reason: "escalated", recipients });
    for (const p of escalated) expect(await attemptDelivery({ deliveryId: p.id })).toMatchObject({ status: "delivered" });
    const sent = smtp.messages.slice(1);
    expect(sent.map((m) => m.envelopeTo).sort()).toEqual([["team@example.com"], ["viewer.backup@example.com"]]);
    const mail = sent.find((m) => m.envelopeTo[0] === "viewer.backup@example.com")!.mail;
    expect(mail.subject).toBe(`[notify] A plan gate on "Add a changelog entry" was escalated to you (its deadline 2030-01-02 03:04:05 UTC passed)`);
    expect(mail.text).toContain("Nobody decided by the deadline (2030-01-02 03:04:05 UTC): you may now decide it as its backup approver.");
    expect(mail.text).toContain(`Open: http://127.0.0.1:3000/runs/${runId}#gate-${gateId}`);
    const rows = await Promise.all(escalated.map((p) => deliveryRow(p.id)));
    expect(rows.find((r) => r.recipientUserId === viewer.id)).toMatchObject({ target: "viewer.backup@example.com", message: { reason: "escalated", deadline: "2030-01-02T03:04:05.000Z" } });
    expect(rows.some((r) => r.recipientUserId === outsiderId)).toBe(false);
  });

  it("a defaulted decision says which default applied and when the deadline passed", async () => {
    const deadline = { at, reminders: [], onTimeout: { action: "default" as const, answer: "approve" } };
    const { runId, gateId } = await gateWorld({ deadline });
    expect(await timeOut({ runId, stepKey: `test:${gateId}:timeout`, subject: { type: "gate", id: gateId }, deadline })).toEqual({ kind: "defaulted" });
    const message = await buildMessage({ runId, subject: { type: "gate", id: gateId }, reason: "defaulted" });
    expect(message.text).toContain(`Nobody decided by the deadline (2030-01-02 03:04:05 UTC): the declared default "approve" was applied.`);
    expect(message).toMatchObject({ deadline: "2030-01-02T03:04:05.000Z", url: `http://127.0.0.1:3000/runs/${runId}#gate-${gateId}` });
  });
});
