import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { setMember } from "@/lib/db/queries/members";
import { listEvents } from "@/lib/db/event-store";
import { query } from "@/lib/executor/store";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { getRunDetail } from "@/lib/runs/service";
import { listInbox } from "@/lib/runs/inbox";
import { savePersonalChannel, saveProjectChannel } from "@/lib/notifications/store";
import { announceDecision } from "@/inngest/announce";
import { clarificationAnswered, decisionNotify, gateDecided } from "@/inngest/events";
import { makeUser } from "../auth/fixtures";
import { startSmtp } from "../notifications/receivers";
import {
  expectRunConsistent,
  git,
  launch,
  newProject,
  startWorkflowHarness,
  until,
  waitForPendingGate,
  waitForStatus,
  waitForWorkflow,
} from "./harness";

/*
 * Deadlines on decisions (config.deadlines) through the real workflow on the embedded executor, in strict cloud mode.
 * The clock is faked (Date only, still ticking): moving it on makes the workflow's durable waits — absolute timeouts
 * the executor holds — come due exactly as hours passing would, without waiting for them.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Move the (faked) clock on, once nothing executes: no step is mid-flight while its lease's time jumps. */
async function advanceClock(ms: number) {
  await until(async () => (await h.executor.status()).inFlight === 0, "the runs to park");
  vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() });
  vi.setSystemTime(Date.now() + ms);
}

async function eventsOf(runId: string) {
  return listEvents({ runId, limit: 1000 });
}

/** The run/decision.notify events the workflow sent for this run (the notify function delivers them). */
async function notifications(runId: string) {
  const rows = await query<{ payload: string }>("SELECT payload FROM executor_events WHERE name = ? ORDER BY seq", [decisionNotify.name]);
  return rows.map((r) => JSON.parse(r.payload) as { data: { runId: string; subject: { type: string; id: string }; reason: string; recipients?: string[] } }).filter((e) => e.data.runId === runId).map((e) => e.data);
}

describe("a gate with a deadline: reminder, escalation to a backup approver", () => {
  it("2 minutes: a reminder after 1, then escalation to a viewer, who may decide only from then on and approves", async () => {
    const { project } = await newProject(h.user);
    const backup = await makeUser("Backup");
    await setMember({ projectId: project.id, userId: backup.id, role: "viewer" });
    const backupUser = { id: backup.id, name: backup.name, via: "api-token" as const };
    // The project's SMTP server, and the backup's own address: their notice comes only with the escalation.
    const smtp = await startSmtp({ username: "deadline", password: "smtp-deadline-pass" });
    onTestFinished(() => smtp.close());
    await saveProjectChannel({
      user: h.user,
      projectId: project.id,
      kind: "email",
      input: {
        enabled: true,
        config: { host: "127.0.0.1", port: smtp.port, secure: false, username: "deadline", from: "gatehouse@example.com", to: ["team@example.com"] },
        secret: "smtp-deadline-pass",
      },
    });
    await savePersonalChannel({ user: backupUser, kind: "email", input: { enabled: true, config: { address: "backup@example.com" } } });
    const toBackup = () => smtp.messages.filter((m) => m.envelopeTo.includes("backup@example.com"));
    const run = await launch(h.user, project.id, "Deadline gate", {
      trustMode: { planning: "manual" },
      deadlines: { plan: { after: "2m", remind: ["1m"], onTimeout: { action: "escalate", to: { userId: backup.id } } } },
    });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    const requested = (await eventsOf(run.id)).find((e) => e.type === "APPROVAL_REQUESTED")!;
    const deadline = (requested.payload as { deadline: { at: number; reminders: number[]; onTimeout: unknown } }).deadline;
    expect(deadline.at - requested.timestamp).toBeGreaterThanOrEqual(2 * 60_000 - 1_000);
    expect(deadline.at - requested.timestamp).toBeLessThanOrEqual(2 * 60_000 + 1_000);
    expect(deadline.reminders).toHaveLength(1);
    expect(deadline.at - deadline.reminders[0]!).toBe(60_000);
    expect(deadline.onTimeout).toEqual({ action: "escalate", to: { userId: backup.id } });

    // A viewer may not decide the gate before it escalates.
    await expect(approveGate({ user: backupUser, runId: run.id, input: { gateId: gate.id } })).rejects.toMatchObject({ status: 403 });

    await advanceClock(61_000);
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "DECISION_REMINDED"), "the reminder");
    let events = await eventsOf(run.id);
    expect(events.find((e) => e.type === "DECISION_REMINDED")!.payload).toMatchObject({ subject: { type: "gate", id: gate.id }, reminder: 0, deadline: deadline.at });
    expect(events.map((e) => e.type)).not.toContain("DECISION_ESCALATED");
    expect(await until(async () => (await notifications(run.id)).find((n) => n.reason === "reminder"), "the reminder's notification")).toEqual({
      runId: run.id,
      subject: { type: "gate", id: gate.id },
      reason: "reminder",
    });
    expect((await waitForStatus(run.id, ["awaiting_approval"])).status).toBe("awaiting_approval");
    await expect(approveGate({ user: backupUser, runId: run.id, input: { gateId: gate.id } })).rejects.toMatchObject({ status: 403 });
    // Not yet theirs: not in the backup's inbox; the team's list had the reminder (with its deadline), the backup nothing.
    expect((await listInbox({ user: backupUser, filter: "all" })).items.map((i) => i.id)).not.toContain(gate.id);
    const reminded = await until(async () => smtp.messages.find((m) => m.mail.subject?.includes("(reminder)")), "the reminder's email");
    expect(reminded.envelopeTo).toEqual(["team@example.com"]);
    expect(reminded.mail.subject).toContain(`(due ${new Date(deadline.at).toISOString().replace("T", " ").slice(0, 19)} UTC)`);
    expect(toBackup()).toEqual([]);

    await advanceClock(60_000);
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "DECISION_ESCALATED"), "the escalation");
    events = await eventsOf(run.id);
    const types = events.map((e) => e.type);
    expect(types.indexOf("DECISION_TIMED_OUT")).toBe(types.indexOf("DECISION_ESCALATED") - 1);
    expect(events.find((e) => e.type === "DECISION_TIMED_OUT")!.payload).toMatchObject({ subject: { type: "gate", id: gate.id }, deadline: deadline.at, action: "escalate" });
    expect(events.find((e) => e.type === "DECISION_ESCALATED")!.payload).toMatchObject({
      subject: { type: "gate", id: gate.id },
      to: { userId: backup.id },
      recipients: [backup.id],
    });
    expect(await until(async () => (await notifications(run.id)).find((n) => n.reason === "escalated"), "the escalation's notification")).toEqual({
      runId: run.id,
      subject: { type: "gate", id: gate.id },
      reason: "escalated",
      recipients: [backup.id],
    });
    // The backup's inbox has it now, with its deadline, and their own email says it was escalated to them.
    const inboxed = (await listInbox({ user: backupUser })).items.find((i) => i.id === gate.id);
    expect(inboxed).toMatchObject({ escalated: true, escalatedToYou: true, deadline: new Date(deadline.at).toISOString(), read: false });
    const mail = (await until(async () => toBackup()[0], "the backup's email")).mail;
    expect(mail.subject).toContain("was escalated to you");
    expect(mail.text).toContain("you may now decide it as its backup approver");
    expect(mail.text).toContain(`/runs/${run.id}#gate-${gate.id}`);
    // Still open: escalation hands the decision on, it does not take it.
    expect((await waitForStatus(run.id, ["awaiting_approval"])).status).toBe("awaiting_approval");
    // The run detail (GET /api/runs/:id) carries the deadline and how far it went, for the card's countdown.
    const detail = await getRunDetail({ user: h.user, runId: run.id });
    expect(detail.gates.find((g) => g.id === gate.id)!.deadline).toEqual({
      at: deadline.at,
      reminders: deadline.reminders,
      onTimeout: { action: "escalate", to: { userId: backup.id } },
      reminded: 1,
      timedOut: true,
      escalated: { to: { userId: backup.id }, recipients: [backup.id] },
      escalatesToName: "Backup",
    });

    await approveGate({ user: backupUser, runId: run.id, input: { gateId: gate.id, notes: "approved as the backup" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "cancelled"])).status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    events = await expectRunConsistent(run.id);
    expect(events.find((e) => e.type === "APPROVAL_GRANTED")!.payload).toMatchObject({ gateId: gate.id, by: backup.id });
    expect(events.filter((e) => e.type === "DECISION_REMINDED")).toHaveLength(1);
    // Opened, reminded, escalated: one notice each; the backup got only the escalation's.
    expect((await notifications(run.id)).map((n) => n.reason)).toEqual(["opened", "reminder", "escalated"]);
    expect(toBackup()).toHaveLength(1);
  });

  it("onTimeout cancel, across an executor restart: nobody decides, the run is cancelled at the deadline and its gate closed", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Deadline cancel", {
      trustMode: { planning: "manual" },
      deadlines: { plan: { after: "2m", onTimeout: { action: "cancel" } } },
    });
    const gate = await waitForPendingGate(run.id);
    await until(async () => (await h.executor.status()).inFlight === 0, "the run to park");
    // The executor that parked the run stops; a new one (as after a restart) holds nothing of it in memory.
    await h.close();
    h = await startWorkflowHarness();
    await advanceClock(2 * 60_000 + 1_000);
    expect((await waitForStatus(run.id, ["cancelled", "completed", "failed"])).status).toBe("cancelled");
    expect(await waitForWorkflow(run.id)).toMatch(/completed|cancelled/);
    const events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    expect(types.slice(-2)).toEqual(["DECISION_TIMED_OUT", "RUN_CANCELLED"]);
    expect(events.at(-1)!.payload).toMatchObject({ by: "deadline" });
    const db = await getDb();
    expect((await db.select().from(gates).where(eq(gates.id, gate.id)))[0]!.status).toBe("cancelled");
    expect(events.filter((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation")).toHaveLength(0);
  });
});

describe("a question with a declared default", () => {
  it("nobody answers: at the deadline the default is the answer, and the run continues with it", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", {
      trustMode: { planning: "auto" },
      deadlines: { clarification: { after: "2m", remind: ["30s before"], onTimeout: { action: "default", answer: "french" } } },
    });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const db = await getDb();
    const question = await until(
      async () => (await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id))).find((c) => c.status === "pending"),
      "the question",
    );
    // Past the reminder point and the deadline at once (as after an outage): no reminder is sent that late.
    await advanceClock(2 * 60_000 + 1_000);
    expect((await waitForStatus(run.id, ["completed", "failed", "cancelled"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    expect(types).not.toContain("DECISION_REMINDED");
    const at = types.indexOf("DECISION_TIMED_OUT");
    expect(types.slice(at, at + 3)).toEqual(["DECISION_TIMED_OUT", "DECISION_DEFAULTED", "CLARIFICATION_ANSWERED"]);
    // The default named one of the question's options (in another case): that option is the typed answer.
    expect(events[at + 1]!.payload).toMatchObject({ subject: { type: "clarification", id: question.id }, answer: "french" });
    expect(events[at + 1]!.payload).not.toHaveProperty("outsideOptions");
    expect(events[at + 2]!.payload).toMatchObject({ clarificationId: question.id, by: "deadline" });
    const stored = (await db.select().from(clarificationRequests).where(eq(clarificationRequests.id, question.id)))[0]!;
    expect(stored).toMatchObject({ status: "answered", response: "French", answeredBy: "deadline" });
    // The implementer got the default as its answer.
    expect(git(repo, "show", `${run.branch}:docs/requests/greeting.md`)).toMatch(/\*\*Which language\?\*\* — French/);
    expect(await until(async () => (await notifications(run.id)).find((n) => n.reason === "defaulted"), "the default's notification")).toEqual({
      runId: run.id,
      subject: { type: "clarification", id: question.id },
      reason: "defaulted",
    });
  });
});

describe("a question escalated to a project role", () => {
  it("a viewer may answer only once the question escalated to viewers; the run goes on with their answer", async () => {
    const { project, repo } = await newProject(h.user);
    const viewer = await makeUser("Viewer");
    await setMember({ projectId: project.id, userId: viewer.id, role: "viewer" });
    const viewerUser = { id: viewer.id, name: viewer.name, via: "api-token" as const };
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", {
      trustMode: { planning: "auto" },
      deadlines: { clarification: { after: "10m", onTimeout: { action: "escalate", to: { role: "viewer" } } } },
    });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const db = await getDb();
    const question = await until(
      async () => (await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id))).find((c) => c.status === "pending"),
      "the question",
    );
    await expect(answerClarification({ user: viewerUser, clarificationId: question.id, response: "English" })).rejects.toMatchObject({ status: 403 });

    await advanceClock(10 * 60_000 + 1_000);
    const escalated = await until(async () => (await eventsOf(run.id)).find((e) => e.type === "DECISION_ESCALATED"), "the escalation");
    // Everyone with the role or a higher one is a backup approver: the viewer and the owner.
    expect((escalated.payload as { recipients: string[] }).recipients.sort()).toEqual([h.user.id, viewer.id].sort());

    await answerClarification({ user: viewerUser, clarificationId: question.id, response: "English" });
    await announceDecision({
      event: clarificationAnswered.create({ runId: run.id, clarificationId: question.id }),
      key: decisionKey.clarification(question.id),
    });
    expect((await waitForStatus(run.id, ["completed", "failed", "cancelled"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(events.find((e) => e.type === "CLARIFICATION_ANSWERED")!.payload).toMatchObject({ clarificationId: question.id, by: viewer.id });
    expect(git(repo, "show", `${run.branch}:docs/requests/greeting.md`)).toMatch(/\*\*Which language\?\*\* — English/);
  });
});
