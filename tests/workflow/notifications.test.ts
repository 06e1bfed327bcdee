import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as redeliverRoute } from "@/app/api/projects/[id]/deliveries/[deliveryId]/redeliver/route";
import { GET as channelsRoute } from "@/app/api/projects/[id]/notifications/route";
import { getDb } from "@/lib/db";
import { notificationDeliveries } from "@/lib/db/schema";
import { listEvents, getRunState } from "@/lib/db/event-store";
import { savePersonalChannel, saveProjectChannel } from "@/lib/notifications/store";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { setMember } from "@/lib/db/queries/members";
import { users } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { resetEnvCache } from "@/lib/env";
import { announceDecision } from "@/inngest/announce";
import { clarificationAnswered } from "@/inngest/events";
import { decisionKey } from "@/lib/runs/gates/acks";
import { NOTIFY_RETRIES } from "@/inngest/notify";
import { expectRunConsistent, launch, newProject, until, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { startHttpReceiver, startSmtp, webhookSecret } from "../notifications/receivers";

/*
 * Decision notices through the real workflow on the embedded executor in strict (Inngest Cloud) mode: a gate opens, the
 * workflow announces it, notify-decision sends on every channel. A webhook endpoint that keeps failing is retried with
 * backoff, then logged as failed and shown on the run, while the run waits at its gate as if nothing happened; a
 * working channel beside it is delivered; redelivery from the API sends the failed one again once the endpoint is back.
 */

const h = useWorkflowHarness();

const admin = { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" };

async function deliveriesOf(runId: string) {
  const db = await getDb();
  return db.select().from(notificationDeliveries).where(eq(notificationDeliveries.workflowRunId, runId));
}

describe("decision notices from a running workflow", () => {
  it("a failing webhook is retried, then logged as failed and shown on the run; the run is unaffected; redelivery works", async () => {
    let endpointUp = false;
    const hook = await startHttpReceiver(() => ({ status: endpointUp ? 204 : 503 }));
    const smtp = await startSmtp({ username: "gh", password: "smtp-secret-pass" });
    try {
      const { project } = await newProject(h.user);
      const secret = webhookSecret();
      await saveProjectChannel({ user: h.user, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: `${hook.url}/in` }, secret } });
      await saveProjectChannel({
        user: h.user,
        projectId: project.id,
        kind: "email",
        input: { enabled: true, config: { host: "127.0.0.1", port: smtp.port, username: "gh", from: "gatehouse@example.com", to: ["deciders@example.com"] }, secret: "smtp-secret-pass" },
      });

      const run = await launch(h.user, project.id, "Write a note about notifications", { trustMode: { planning: "manual" } });
      await waitForStatus(run.id, ["awaiting_approval"]);
      const gate = await waitForPendingGate(run.id);

      // The webhook: every attempt of the retries, then failed in the log.
      const failed = await until(async () => (await deliveriesOf(run.id)).find((d) => d.kind === "webhook" && d.status === "failed"), "the webhook delivery to fail");
      expect(failed.attempts).toBe(NOTIFY_RETRIES + 1);
      expect(failed.lastError).toBe("the endpoint answered HTTP 503");
      expect(hook.requests).toHaveLength(NOTIFY_RETRIES + 1);
      // One message, retried: the same webhook-id each time, each attempt signed afresh and verifiable.
      expect(new Set(hook.requests.map((r) => r.headers["webhook-id"]))).toEqual(new Set([failed.messageId]));
      for (const r of hook.requests) {
        const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));
        expect(new Webhook(secret).verify(r.body, headers)).toMatchObject({ data: { runId: run.id, subject: { type: "gate", id: gate.id }, reason: "opened" } });
      }

      // The email beside it went out at once.
      const emailed = await until(async () => (await deliveriesOf(run.id)).find((d) => d.kind === "email" && d.status === "delivered"), "the email delivery");
      expect(emailed.attempts).toBe(1);
      expect(smtp.messages).toHaveLength(1);
      expect(smtp.messages[0]!.mail.text).toContain(`/runs/${run.id}#gate-${gate.id}`);

      // On the run: a NOTIFICATION_FAILED event, and nothing else changed: still waiting at the same gate.
      const events = await until(async () => {
        const all = await listEvents({ runId: run.id });
        return all.some((e) => e.type === "NOTIFICATION_FAILED") ? all : null;
      }, "NOTIFICATION_FAILED on the run");
      const noticed = events.filter((e) => e.type === "NOTIFICATION_FAILED");
      expect(noticed).toHaveLength(1);
      expect(noticed.map((e) => e.payload)).toMatchObject([
        { deliveryId: failed.id, channel: "webhook", personal: false, subject: { type: "gate", id: gate.id }, reason: "opened", attempts: NOTIFY_RETRIES + 1, error: "the endpoint answered HTTP 503" },
      ]);
      expect(JSON.stringify(events)).not.toContain(secret.slice(6));
      expect(JSON.stringify(events)).not.toContain("smtp-secret-pass");
      expect((await getRunState({ id: run.id }))?.status).toBe("awaiting_approval");
      expect((await waitForPendingGate(run.id)).id).toBe(gate.id);

      // The API never returns the secrets.
      const listed = await channelsRoute(new Request(`http://127.0.0.1:3000/api/projects/${project.id}/notifications`, { headers: admin }), { params: Promise.resolve({ id: project.id }) });
      const listedText = await listed.text();
      expect(listed.status).toBe(200);
      expect(listedText).not.toContain(secret.slice(6, 30));
      expect(listedText).not.toContain("smtp-secret-pass");
      expect(JSON.parse(listedText).channels.map((c: { secret: string }) => c.secret)).toEqual(["set", "set"]);

      // Redelivery from the log once the endpoint is back: one more attempt, delivered, verifiable.
      endpointUp = true;
      const redelivered = await redeliverRoute(
        new Request(`http://127.0.0.1:3000/api/projects/${project.id}/deliveries/${failed.id}/redeliver`, { method: "POST", headers: admin }),
        { params: Promise.resolve({ id: project.id, deliveryId: failed.id }) },
      );
      expect(redelivered.status).toBe(202);
      expect((await redelivered.json()).delivery).toMatchObject({ id: failed.id, status: "pending" });
      const delivered = await until(async () => (await deliveriesOf(run.id)).find((d) => d.id === failed.id && d.status === "delivered"), "the redelivery");
      expect(delivered.attempts).toBe(NOTIFY_RETRIES + 2);
      expect(delivered.lastError).toBeNull();
      const last = hook.requests.at(-1)!;
      expect(new Webhook(secret).verify(last.body, Object.fromEntries(Object.entries(last.headers).map(([k, v]) => [k, String(v)])))).toBeTruthy();
      // A delivered one is not sent again.
      const again = await redeliverRoute(
        new Request(`http://127.0.0.1:3000/api/projects/${project.id}/deliveries/${failed.id}/redeliver`, { method: "POST", headers: admin }),
        { params: Promise.resolve({ id: project.id, deliveryId: failed.id }) },
      );
      expect(again.status).toBe(409);

      // The run goes on when a person decides, to the end.
      const approved = await approveRoute(
        new Request(`http://127.0.0.1:3000/api/runs/${run.id}/approve`, { method: "POST", headers: admin, body: JSON.stringify({ gateId: gate.id }) }),
        { params: Promise.resolve({ id: run.id }) },
      );
      expect(approved.status).toBe(200);
      await waitForStatus(run.id, ["completed"]);
      expect(await waitForWorkflow(run.id)).toBe("completed");
      await expectRunConsistent(run.id);
    } finally {
      await hook.close();
      await smtp.close();
    }
  });

  it("a question the run asks is announced too: the project's Telegram chat and each decider's own chat, not a viewer's", async () => {
    const telegram = await startHttpReceiver((req) => ({
      status: 200,
      json: { ok: true, result: { message_id: 1, date: 1700000000, chat: { id: Number(JSON.parse(req.body).chat_id), type: "private" }, text: "x" } },
    }));
    process.env.GATEHOUSE_TELEGRAM_API_ROOT = telegram.url;
    resetEnvCache();
    try {
      const { project } = await newProject(h.user);
      const token = "555000111:AAH_workflowbottoken0123456789abc";
      await saveProjectChannel({ user: h.user, projectId: project.id, kind: "telegram", input: { enabled: true, config: { chatId: "-100999" }, secret: token } });
      const db = await getDb();
      const member = async (name: string, role: "approver" | "viewer", chatId: string) => {
        const id = newId("usr");
        await db.insert(users).values({ id, name, email: `${id}@example.com` });
        await setMember({ projectId: project.id, userId: id, role });
        await savePersonalChannel({ user: { id, name, via: "api-token" }, kind: "telegram", input: { enabled: true, config: { chatId } } });
      };
      await member("Approver", "approver", "7001");
      await member("Viewer", "viewer", "7002");

      const run = await launch(h.user, project.id, "Pick one [ask: Which colour? | red | blue]", { trustMode: { planning: "auto" } });
      await waitForStatus(run.id, ["awaiting_clarification"]);
      const delivered = await until(async () => {
        const rows = await deliveriesOf(run.id);
        return rows.length === 2 && rows.every((d) => d.status === "delivered") ? rows : null;
      }, "both Telegram deliveries");
      expect(delivered.every((d) => d.subjectType === "clarification")).toBe(true);
      const question = delivered[0]!.subjectId;
      const sent = telegram.requests.map((r) => JSON.parse(r.body) as { chat_id: string; text: string });
      expect(telegram.requests.every((r) => r.path === `/bot${token}/sendMessage`)).toBe(true);
      expect(sent.map((b) => String(b.chat_id)).sort()).toEqual(["-100999", "7001"]);
      expect(sent[0]!.text).toContain("Question: Which colour?");
      // The run page's anchor for a question, as the inbox links it.
      expect(sent[0]!.text).toContain(`/runs/${run.id}#question-${question}`);

      await answerClarification({ user: h.user, clarificationId: question, response: "blue" });
      await announceDecision({ event: clarificationAnswered.create({ runId: run.id, clarificationId: question }), key: decisionKey.clarification(question) });
      await waitForStatus(run.id, ["completed"]);
      await expectRunConsistent(run.id);
    } finally {
      delete process.env.GATEHOUSE_TELEGRAM_API_ROOT;
      resetEnvCache();
      await telegram.close();
    }
  });
});
