import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as commands } from "@/app/api/slack/commands/route";
import { POST as interactions } from "@/app/api/slack/interactions/route";
import { createLinkCode } from "@/lib/chat/link";
import { resetEnvCache } from "@/lib/env";
import { saveProjectChannel } from "@/lib/notifications/store";
import { attemptDelivery, planDeliveries } from "@/lib/notifications/dispatch";
import { getDb } from "@/lib/db";
import { clarificationRequests, workflowRuns } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { GET as getRunRoute } from "@/app/api/runs/[id]/route";
import { describeEvent } from "@/lib/dashboard/timeline";
import { write } from "@/lib/db";
import { appendEventsTx, listEvents } from "@/lib/db/event-store";
import { createRun } from "@/lib/db/queries/runs";
import { eq } from "drizzle-orm";
import { gateWorld, startHttpReceiver } from "../notifications/receivers";
import { ADMIN, call, runAtPlanGate } from "../api/helpers";
import { buttonBody, chatDecisionsOf, commandBody, gateRow, runAtBudgetGate, SIGNING_SECRET, slackRequest, submissionBody } from "./helpers";

/*
 * Slack, both ways, against Slack's own request shapes: slash commands as form fields and interactions as
 * payload=<JSON>, each signed as Slack signs them (v0 HMAC over the timestamp and the raw body). Slack's side (the
 * response_url and the Web API's views.open) is a local HTTP receiver.
 */

type World = Awaited<ReturnType<typeof gateWorld>>;
let w: World;
let slack: Awaited<ReturnType<typeof startHttpReceiver>>;
const ctx = { params: Promise.resolve({}) };

beforeAll(async () => {
  slack = await startHttpReceiver(() => ({ status: 200, json: { ok: true } }));
  process.env.SLACK_SIGNING_SECRET = SIGNING_SECRET;
  process.env.GATEHOUSE_SLACK_API_URL = `${slack.url}/api/`;
  resetEnvCache();
  w = await gateWorld();
  await saveProjectChannel({ user: w.owner, projectId: w.project.id, kind: "slack", input: { enabled: true, config: { channel: "#approvals" }, secret: "xoxb-1234-5678-abcdefghijkl" } });
});
afterAll(async () => {
  await slack.close();
  delete process.env.SLACK_SIGNING_SECRET;
  delete process.env.GATEHOUSE_SLACK_API_URL;
  resetEnvCache();
});

async function command(user: string, text: string) {
  const response = await commands(slackRequest("/api/slack/commands", commandBody({ user, text })), ctx);
  return { status: response.status, json: await response.json() };
}

async function press(user: string, value: string) {
  const responseUrl = `${slack.url}/respond/${crypto.randomUUID()}`;
  const response = await interactions(slackRequest("/api/slack/interactions", buttonBody({ user, value, responseUrl, blocks: [{ type: "section", text: { type: "mrkdwn", text: "notice" } }, { type: "actions", elements: [] }] })), ctx);
  const answers = slack.requests.filter((r) => r.path === new URL(responseUrl).pathname).map((r) => JSON.parse(r.body));
  return { status: response.status, answers };
}

async function link(user: World["approver"], slackUser: string) {
  const { code } = await createLinkCode({ user });
  const linked = await command(slackUser, `link ${code}`);
  expect(linked.json.text).toMatch(new RegExp(`now acts as ${user.name}`));
}

describe("Slack requests are verified before anything is read", () => {
  it("a forged signature, a stale timestamp or no signature is a 401, and the gate stays pending", async () => {
    const body = buttonBody({ user: "UAPPROVER", value: `ap:${w.gateId}`, responseUrl: `${slack.url}/respond/x` });
    const forged = await interactions(slackRequest("/api/slack/interactions", body, { secret: "not-the-signing-secret" }), ctx);
    expect(forged.status).toBe(401);
    const stale = await interactions(slackRequest("/api/slack/interactions", body, { at: Math.floor(Date.now() / 1000) - 6 * 60 }), ctx);
    expect(stale.status).toBe(401);
    expect((await stale.json()).error.message).toMatch(/more than 5 minutes old/);
    const unsigned = await interactions(new Request("http://127.0.0.1:3000/api/slack/interactions", { method: "POST", body }), ctx);
    expect(unsigned.status).toBe(401);
    // The body altered after signing.
    const good = slackRequest("/api/slack/interactions", body);
    const altered = await interactions(new Request(good.url, { method: "POST", headers: good.headers, body: body.replace("UAPPROVER", "UOWNER00") }), ctx);
    expect(altered.status).toBe(401);
    expect((await gateRow(w.gateId)).status).toBe("pending");
  });

  it("an unlinked Slack account's press changes nothing and is told how to link", async () => {
    const pressed = await press("UNOBODY", `ap:${w.gateId}`);
    expect(pressed.status).toBe(200);
    expect(pressed.answers[0]).toMatchObject({ response_type: "ephemeral", replace_original: false });
    expect(pressed.answers[0].text).toMatch(/not linked to a Gatehouse user/);
    expect((await gateRow(w.gateId)).status).toBe("pending");
  });

  it("a body past GATEHOUSE_CHAT_MAX_BYTES is refused with 413", async () => {
    const big = `payload=${"x".repeat(300 * 1024)}`;
    const response = await interactions(slackRequest("/api/slack/interactions", big), ctx);
    expect(response.status).toBe(413);
  });
});

describe("deciding from Slack as the linked user", () => {
  it("link → approve: applied once as that user, recorded with where, the notice loses its buttons; a second press says who decided when", async () => {
    await link(w.approver, "UAPPROVER");
    const first = await press("UAPPROVER", `ap:${w.gateId}`);
    expect(first.status).toBe(200);
    expect(first.answers[0]).toMatchObject({ replace_original: true });
    expect(first.answers[0].blocks.map((b: { type: string }) => b.type)).toEqual(["section", "context"]);
    const gate = await gateRow(w.gateId);
    expect(gate).toMatchObject({ status: "approved", decidedBy: w.approver.id });
    expect(await chatDecisionsOf(w.runId)).toEqual([
      expect.objectContaining({ provider: "slack", externalId: "T0001:UAPPROVER", place: "slack T0001/C2147483705", userId: w.approver.id, subjectId: w.gateId, action: "approve" }),
    ]);

    const again = await press("UAPPROVER", `ap:${w.gateId}`);
    expect(again.answers[0].text).toMatch(/^Already decided by Approver at \d{4}-\d\d-\d\d \d\d:\d\d UTC: approved\.$/);
    expect(await chatDecisionsOf(w.runId)).toHaveLength(1);
  });

  it("the run page says the approval came from Slack: GET /api/runs/:id gives the chat origin (no chat account id), the timeline reads it", async () => {
    const detail = await call(getRunRoute, { method: "GET", path: `/api/runs/${w.runId}`, params: { id: w.runId }, headers: ADMIN });
    expect(detail.status).toBe(200);
    expect(detail.json.chatOrigins).toEqual([{ subjectId: w.gateId, action: "approve", provider: "slack", userId: w.approver.id, at: expect.any(String) }]);
    const granted = (await listEvents({ runId: w.runId })).find((e) => e.type === "APPROVAL_GRANTED")!;
    const line = describeEvent({ ...granted, timestamp: new Date(granted.timestamp).toISOString() } as never, detail.json.people, detail.json.chatOrigins);
    expect(line.detail).toBe("by Approver from Slack");
  });

  it("a viewer's press is refused with why, and changes nothing", async () => {
    const { runId, gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Viewer tries" });
    await link(w.viewer, "UVIEWER");
    const pressed = await press("UVIEWER", `ap:${gateId}`);
    expect(pressed.answers[0].text).toBe("Refused: you are a viewer on this project; only approvers and owners may decide.");
    expect((await gateRow(gateId)).status).toBe("pending");
    expect(await chatDecisionsOf(runId)).toEqual([]);
  });

  it("reject opens a modal through the Web API; its submission rejects with the feedback", async () => {
    const { gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Reject me" });
    const pressed = await press("UAPPROVER", `rj:${gateId}`);
    expect(pressed.status).toBe(200);
    const opened = slack.requests.filter((r) => r.path === "/api/views.open").at(-1)!;
    expect(opened.headers.authorization).toBe("Bearer xoxb-1234-5678-abcdefghijkl");
    const form = new URLSearchParams(opened.body);
    const view = JSON.parse(form.get("view")!);
    expect(form.get("trigger_id")).toBe("12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3");
    expect(view).toMatchObject({ type: "modal", callback_id: "gatehouse-decision" });
    expect((await gateRow(gateId)).status).toBe("pending");

    const submitted = await interactions(slackRequest("/api/slack/interactions", submissionBody({ user: "UAPPROVER", metadata: view.private_metadata, value: "Split the task in two" })), ctx);
    expect(submitted.status).toBe(200);
    expect(await submitted.json()).toEqual({ response_action: "clear" });
    expect(await gateRow(gateId)).toMatchObject({ status: "rejected", notes: "Split the task in two", decidedBy: w.approver.id });
  });
});

describe("questions and races from Slack", () => {
  async function question(responseType: string, options?: string[]) {
    const run = await createRun({ projectId: w.project.id, userId: w.owner.id, request: `Ask ${responseType}`, config: {} });
    const id = newId("clr");
    await write(async (tx) => {
      await appendEventsTx(tx, run.id, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage: "implementation" } }] as never);
      await tx.insert(clarificationRequests).values({ id, workflowRunId: run.id, stage: "implementation", question: "Which colours?", responseType, options });
      await appendEventsTx(tx, run.id, [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId: id, stage: "implementation", question: "Which colours?" } }] as never);
    });
    return id;
  }
  const openedView = () => JSON.parse(new URLSearchParams(slack.requests.filter((r) => r.path === "/api/views.open").at(-1)!.body).get("view")!);
  const clarification = async (id: string) => (await getDb()).query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, id) });

  it("Answer… opens a modal asking the question; a text answer and a multiple choice (checkboxes) are stored as typed", async () => {
    const text = await question("text");
    await press("UAPPROVER", `tx:${text}`);
    const view = openedView();
    expect(view.blocks[0]).toMatchObject({ type: "input", block_id: "answer", label: { text: "Which colours?" }, element: { type: "plain_text_input" } });
    await interactions(slackRequest("/api/slack/interactions", submissionBody({ user: "UAPPROVER", metadata: view.private_metadata, value: "Blue and green" })), ctx);
    expect(await clarification(text)).toMatchObject({ status: "answered", response: "Blue and green", answeredBy: w.approver.id });

    const multi = await question("multiple_choice", ["red", "green", "blue"]);
    await press("UAPPROVER", `tx:${multi}`);
    const checkboxes = openedView();
    expect(checkboxes.blocks[0].element).toMatchObject({ type: "checkboxes", options: [{ value: "red" }, { value: "green" }, { value: "blue" }] });
    const wrong = await interactions(slackRequest("/api/slack/interactions", submissionBody({ user: "UAPPROVER", metadata: checkboxes.private_metadata, selected: ["purple"] })), ctx);
    expect(await wrong.json()).toMatchObject({ response_action: "errors", errors: { answer: expect.stringMatching(/choose one or more distinct options/) } });
    await interactions(slackRequest("/api/slack/interactions", submissionBody({ user: "UAPPROVER", metadata: checkboxes.private_metadata, selected: ["red", "blue"] })), ctx);
    expect(await clarification(multi)).toMatchObject({ status: "answered", response: ["red", "blue"] });
  });

  it("a Slack press and a dashboard approve at once make one decision; the loser is told who decided", async () => {
    const { gateId, runId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Race" });
    const [slackPress, dashboard] = await Promise.all([
      press("UAPPROVER", `ap:${gateId}`),
      call(approveRoute, { method: "POST", path: `/api/runs/${runId}/approve`, params: { id: runId }, headers: ADMIN, body: { gateId } }),
    ]);
    const gate = await gateRow(gateId);
    expect(gate.status).toBe("approved");
    expect((await listEvents({ runId })).filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
    if (gate.decidedBy === w.approver.id) {
      expect(dashboard.status).toBe(409);
      expect(slackPress.answers[0]).toMatchObject({ replace_original: true });
    } else {
      expect(dashboard.status).toBe(200);
      expect(slackPress.answers[0].text).toMatch(/^Already decided by .+ at .+ UTC: approved\.$/);
    }
  });
});

describe("a paused run from Slack", () => {
  it("Extend after a timeout resumes it once; a second press says who extended it when", async () => {
    const run = await createRun({ projectId: w.project.id, userId: w.owner.id, request: "Time out", config: {} });
    await write((tx) =>
      appendEventsTx(tx, run.id, [
        { type: "RUN_STARTED", payload: {} },
        { type: "STAGE_STARTED", payload: { stage: "implementation" } },
        { type: "RUN_PAUSED", payload: { reason: "timeout", message: "ran past 30 min", stage: "implementation" } },
      ] as never),
    );
    const first = await press("UAPPROVER", `ex:${run.id}`);
    expect(first.answers[0].text).toMatch(/^Extended by Approver \(from Slack\)/);
    const events = await listEvents({ runId: run.id });
    expect(events.filter((e) => e.type === "RUN_RESUMED")).toEqual([expect.objectContaining({ payload: expect.objectContaining({ action: "extend", by: w.approver.id }) })]);
    const again = await press("UAPPROVER", `ex:${run.id}`);
    expect(again.answers[0].text).toMatch(/^Already decided by Approver at .* UTC: the run is running\.$/);
    expect((await listEvents({ runId: run.id })).filter((e) => e.type === "RUN_RESUMED")).toHaveLength(1);
  });
});

describe("a budget gate from Slack (the run page's ways on)", () => {
  it("Raise by the suggested amount raises it once as the pressing user; a second press says who decided when", async () => {
    const { runId, gateId } = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Spend more", used: 6200, limit: 5000 });
    const first = await press("UAPPROVER", `br:${gateId}`);
    expect(first.answers[0]).toMatchObject({ replace_original: true });
    expect(first.answers[0].text).toMatch(/^Budget raised by Approver \(from Slack\) at /);
    expect(await gateRow(gateId)).toMatchObject({ status: "approved", decision: "raise", decidedBy: w.approver.id, payload: { raise: { tokens: 5000, costUsd: 0, minutes: 0 } } });
    expect(await chatDecisionsOf(runId)).toEqual([expect.objectContaining({ subjectId: gateId, action: "raise the budget", userId: w.approver.id })]);
    const again = await press("UAPPROVER", `br:${gateId}`);
    expect(again.answers[0].text).toMatch(/^Already decided by Approver at .* UTC: approved\.$/);
    expect((await listEvents({ runId })).filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
  });

  it("Raise by… opens a modal in the gate's unit; a typed amount raises by it, a word is refused in the modal", async () => {
    const { gateId } = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Spend dollars", stage: "planning", metric: "costUsd", used: 0.8, limit: 0.5 });
    await press("UAPPROVER", `bx:${gateId}`);
    const view = JSON.parse(new URLSearchParams(slack.requests.filter((r) => r.path === "/api/views.open").at(-1)!.body).get("view")!);
    expect(view).toMatchObject({ title: { text: "Raise the budget" }, blocks: [{ label: { text: "Raise by (USD)" }, element: { type: "plain_text_input", initial_value: "0.5" } }] });
    const wrong = await interactions(slackRequest("/api/slack/interactions", submissionBody({ user: "UAPPROVER", metadata: view.private_metadata, value: "lots" })), ctx);
    expect(await wrong.json()).toMatchObject({ response_action: "errors", errors: { answer: "Type how much to add, in USD: a number above 0." } });
    expect((await gateRow(gateId)).status).toBe("pending");
    const ok = await interactions(slackRequest("/api/slack/interactions", submissionBody({ user: "UAPPROVER", metadata: view.private_metadata, value: "$2.5" })), ctx);
    expect(await ok.json()).toEqual({ response_action: "clear" });
    expect(await gateRow(gateId)).toMatchObject({ status: "approved", decision: "raise", payload: { raise: { tokens: 0, costUsd: 2.5, minutes: 0 } }, notes: "raised by $2.5" });
  });

  it("Finish this task, then stop decides finish_task; Cancel the run cancels it; a viewer's press is refused", async () => {
    const finish = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Finish up" });
    expect((await press("UVIEWER", `bf:${finish.gateId}`)).answers[0].text).toBe("Refused: you are a viewer on this project; only approvers and owners may decide.");
    expect((await gateRow(finish.gateId)).status).toBe("pending");
    await press("UAPPROVER", `bf:${finish.gateId}`);
    expect(await gateRow(finish.gateId)).toMatchObject({ status: "approved", decision: "finish_task", decidedBy: w.approver.id });

    const cancel = await runAtBudgetGate({ projectId: w.project.id, userId: w.owner.id, request: "Stop here" });
    const pressed = await press("UAPPROVER", `bc:${cancel.gateId}`);
    expect(pressed.answers[0].text).toMatch(/^Cancelled by Approver \(from Slack\)/);
    const db = await getDb();
    expect((await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, cancel.runId) }))?.status).toBe("cancelled");
    expect((await press("UAPPROVER", `bc:${cancel.gateId}`)).answers[0].text).toMatch(/^Already decided by Approver at .* UTC: cancelled\.$/);
  });
});

describe("notices out carry the buttons", () => {
  it("a plan gate's Slack notice has Approve / Reject… / Ask back… buttons; pressing the posted Approve decides", async () => {
    const { runId, gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Press the posted button" });
    const planned = await planDeliveries({ runId, subject: { type: "gate", id: gateId }, reason: "opened" });
    expect(await attemptDelivery({ deliveryId: planned.find((d) => d.kind === "slack")!.id })).toMatchObject({ status: "delivered" });
    const posted = slack.requests.filter((r) => r.path === "/api/chat.postMessage").at(-1)!;
    const blocks = JSON.parse(new URLSearchParams(posted.body).get("blocks")!);
    const actions = blocks.find((b: { type: string }) => b.type === "actions").elements as Array<{ text: { text: string }; value?: string; url?: string }>;
    expect(actions.map((a) => a.text.text)).toEqual(["Approve", "Reject…", "Ask back…", "Open in Gatehouse"]);
    await press("UAPPROVER", actions[0]!.value!);
    expect(await gateRow(gateId)).toMatchObject({ status: "approved", decidedBy: w.approver.id });
  });
});

describe("slash commands", () => {
  it("/gatehouse waiting lists the open decisions of the linked user; an unknown code links nothing", async () => {
    const { gateId } = await runAtPlanGate({ projectId: w.project.id, userId: w.owner.id, request: "Still waiting here" });
    const waiting = await command("UAPPROVER", "waiting");
    expect(waiting.status).toBe(200);
    expect(waiting.json.response_type).toBe("ephemeral");
    expect(waiting.json.text).toContain(`#gate-${gateId}`);
    expect(waiting.json.text).toContain("Still waiting here");
    const bad = await command("USTRANGER", "link ZZZZZZZZZZ");
    expect(bad.json.text).toMatch(/unknown, used or expired/);
    expect((await command("USTRANGER", "waiting")).json.text).toMatch(/not linked/);
  });

  it("/gatehouse run <project> <request> starts a run as the linked user; a viewer is refused", async () => {
    const started = await command("UAPPROVER", "run notify Add a CHANGELOG entry for 1.2");
    expect(started.json.text).toMatch(/^Run started on notify: http:\/\/127\.0\.0\.1:3000\/runs\/run_/);
    const runId = /runs\/(run_\w+)/.exec(started.json.text)![1]!;
    const db = await getDb();
    const run = await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    expect(run).toMatchObject({ userId: w.approver.id, originalRequest: "Add a CHANGELOG entry for 1.2", projectId: w.project.id });
    const refused = await command("UVIEWER", "run notify Do something");
    expect(refused.json.text).toBe("Refused: you are a viewer on notify; only approvers and owners start runs.");
  });
});
