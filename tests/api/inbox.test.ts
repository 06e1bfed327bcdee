import { beforeAll, describe, expect, it } from "vitest";
import * as inboxRoute from "@/app/api/inbox/route";
import * as streamRoute from "@/app/api/inbox/stream/route";
import * as itemRoute from "@/app/api/inbox/[itemId]/route";
import * as approveRoute from "@/app/api/runs/[id]/approve/route";
import * as cancelRoute from "@/app/api/runs/[id]/cancel/route";
import * as answerRoute from "@/app/api/clarifications/[id]/answer/route";
import { closeDb, write } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { createRun } from "@/lib/db/queries/runs";
import { appendEventsTx } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { setMember } from "@/lib/db/queries/members";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { newId } from "@/lib/ids";
import { inboxEventStream } from "@/lib/dashboard/inbox-stream";
import type { InboxItem } from "@/lib/runs/inbox";
import { timeOut } from "@/lib/runs/deadlines";
import type { DecisionDeadlineInfo } from "@/lib/workflow";
import { makeUser, type TestUser } from "../auth/fixtures";
import { ADMIN, call, makeRepo, runAtPlanGate } from "./helpers";

/*
 * The per-person inbox through its routes: who sees which items (the decision routes' role rule), read and done kept
 * per person in the database, and items done for everyone once anyone decides them.
 */

let ownerId: string;
let approver: TestUser;
let viewer: TestUser;
let stranger: TestUser;
let otherApprover: TestUser;
let projectA: string;
let projectB: string;

beforeAll(async () => {
  ownerId = (await ensureLocalOwner()).id;
  approver = await makeUser("Approver");
  viewer = await makeUser("Viewer");
  stranger = await makeUser("Stranger");
  otherApprover = await makeUser("Other approver");
  projectA = (await createProject({ name: "inbox A", ownerId, repository: { type: "local", path: makeRepo() } })).id;
  projectB = (await createProject({ name: "inbox B", ownerId, repository: { type: "local", path: makeRepo() } })).id;
  await setMember({ projectId: projectA, userId: approver.id, role: "approver" });
  await setMember({ projectId: projectA, userId: viewer.id, role: "viewer" });
  await setMember({ projectId: projectA, userId: otherApprover.id, role: "approver" });
  await setMember({ projectId: projectB, userId: otherApprover.id, role: "approver" });
});

/** A run of the owner's waiting at a plan gate. */
function runAtGate(projectId: string, request: string, deadline?: DecisionDeadlineInfo) {
  return runAtPlanGate({ projectId, userId: ownerId, request, deadline });
}

/** A run waiting for an answer to a question. */
async function runAtQuestion(projectId: string, request: string, question: string, deadline?: DecisionDeadlineInfo) {
  const run = await createRun({ projectId, userId: ownerId, request, config: {} });
  const clarificationId = newId("clr");
  await write(async (tx) => {
    await appendEventsTx(tx, run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "implementation" } },
    ] as never);
    await tx.insert(clarificationRequests).values({ id: clarificationId, workflowRunId: run.id, stage: "implementation", question, responseType: "text" });
    await appendEventsTx(tx, run.id, [{ type: "CLARIFICATION_REQUESTED", payload: { clarificationId, stage: "implementation", question, ...(deadline ? { deadline } : {}) } }] as never);
  });
  return { runId: run.id, clarificationId };
}

type InboxBody = { items: InboxItem[]; open: number; unread: number; truncated: boolean };

async function inbox(headers: Record<string, string>, filter = "open"): Promise<InboxBody> {
  const res = await call(inboxRoute.GET, { path: `/api/inbox?filter=${filter}`, headers });
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json as InboxBody;
}

const mark = (headers: Record<string, string>, itemId: string, action: string) =>
  call(itemRoute.POST, { method: "POST", path: `/api/inbox/${itemId}`, params: { itemId }, headers, body: { action } });

const ids = (body: InboxBody) => body.items.map((i) => i.id);

describe("who sees an item: the people who may decide it", () => {
  it("owner and approver see the gate and the question of their project; a viewer and a stranger see neither", async () => {
    const gate = await runAtGate(projectA, "Scoping: add a page\n\nmore detail");
    const question = await runAtQuestion(projectA, "Scoping: a question", "Which colour?");

    for (const headers of [ADMIN, approver.headers]) {
      const body = await inbox(headers);
      expect(ids(body)).toEqual(expect.arrayContaining([gate.gateId, question.clarificationId]));
    }
    const item = (await inbox(approver.headers)).items.find((i) => i.id === gate.gateId)!;
    expect(item).toMatchObject({
      kind: "gate",
      gateKind: "plan",
      runId: gate.runId,
      runTitle: "Scoping: add a page",
      projectId: projectA,
      projectName: "inbox A",
      read: false,
      done: false,
      doneReason: null,
      link: `/runs/${gate.runId}#gate-${gate.gateId}`,
      deadline: null,
    });
    expect(Date.parse(item.openedAt)).not.toBeNaN();
    const asked = (await inbox(approver.headers)).items.find((i) => i.id === question.clarificationId)!;
    expect(asked).toMatchObject({ kind: "question", gateKind: null, summary: "Which colour?", link: `/runs/${question.runId}#question-${question.clarificationId}` });

    for (const who of [viewer, stranger]) {
      for (const filter of ["open", "unread", "done", "all"]) {
        const body = await inbox(who.headers, filter);
        expect(body.items, `${who.name} ${filter}`).toEqual([]);
        expect(body.open).toBe(0);
        expect(JSON.stringify(body)).not.toContain(gate.runId);
      }
    }
  });

  it("across projects: an approver of two projects sees both, an approver of one only that one's", async () => {
    const a = await runAtGate(projectA, "Across: in A");
    const b = await runAtGate(projectB, "Across: in B");
    expect(ids(await inbox(otherApprover.headers))).toEqual(expect.arrayContaining([a.gateId, b.gateId]));
    const approverIds = ids(await inbox(approver.headers));
    expect(approverIds).toContain(a.gateId);
    expect(approverIds).not.toContain(b.gateId);
  });

  it("a role change moves the item: a viewer made approver sees it, made viewer again does not", async () => {
    const promoted = await makeUser("Promoted");
    await setMember({ projectId: projectA, userId: promoted.id, role: "viewer" });
    const { gateId } = await runAtGate(projectA, "Role change");
    expect(ids(await inbox(promoted.headers))).not.toContain(gateId);
    await setMember({ projectId: projectA, userId: promoted.id, role: "approver" });
    expect(ids(await inbox(promoted.headers))).toContain(gateId);
    await setMember({ projectId: projectA, userId: promoted.id, role: "viewer" });
    expect(ids(await inbox(promoted.headers))).not.toContain(gateId);
  });

  it("marking: a viewer gets 403, a stranger 404, and neither leaves a stored state behind", async () => {
    const { gateId } = await runAtGate(projectA, "Marking rights");
    const byViewer = await mark(viewer.headers, gateId, "read");
    expect(byViewer.status).toBe(403);
    expect(byViewer.json.error.code).toBe("forbidden:auth");
    const byStranger = await mark(stranger.headers, gateId, "done");
    expect(byStranger.status).toBe(404);
    expect(JSON.stringify(byStranger.json)).not.toContain(gateId);
    // Promoted afterwards, they find the item untouched by the refused calls.
    await setMember({ projectId: projectA, userId: stranger.id, role: "approver" });
    const item = (await inbox(stranger.headers)).items.find((i) => i.id === gateId);
    expect(item).toMatchObject({ read: false, done: false });
    await setMember({ projectId: projectA, userId: stranger.id, role: "viewer" });
  });
});

describe("read and done, stored per person", () => {
  it("read and done are this person's only, counted in the badge, and survive a restart of the database client", async () => {
    const { gateId } = await runAtGate(projectA, "Persistence");
    const before = await inbox(approver.headers);
    const read = await mark(approver.headers, gateId, "read");
    expect(read.status).toBe(200);
    expect(read.json.item).toMatchObject({ id: gateId, read: true, done: false });
    const after = await inbox(approver.headers);
    expect(after.unread).toBe(before.unread - 1);
    expect(after.open).toBe(before.open);
    expect((await inbox(approver.headers, "unread")).items.map((i) => i.id)).not.toContain(gateId);
    // Another approver of the same project still has it unread.
    expect((await inbox(otherApprover.headers, "unread")).items.map((i) => i.id)).toContain(gateId);

    const done = await mark(approver.headers, gateId, "done");
    expect(done.json.item).toMatchObject({ read: true, done: true, doneReason: "marked" });
    expect(ids(await inbox(approver.headers))).not.toContain(gateId);
    expect(ids(await inbox(approver.headers, "done"))).toContain(gateId);
    expect(ids(await inbox(otherApprover.headers))).toContain(gateId);

    // A new client on the same database file: the state was in the table, not in memory.
    closeDb();
    const reopened = (await inbox(approver.headers, "all")).items.find((i) => i.id === gateId);
    expect(reopened).toMatchObject({ read: true, done: true, doneReason: "marked" });

    // Unread puts it back as new: open and unread again.
    const reset = await mark(approver.headers, gateId, "unread");
    expect(reset.json.item).toMatchObject({ read: false, done: false, doneReason: null });
    expect((await inbox(approver.headers, "unread")).items.map((i) => i.id)).toContain(gateId);
  });

  it("bad input: an unknown action or filter is a 400 naming the field; an unknown item a 404", async () => {
    const { gateId } = await runAtGate(projectA, "Bad input");
    const badAction = await mark(approver.headers, gateId, "archive");
    expect(badAction.status).toBe(400);
    expect(badAction.json.error.message).toMatch(/action/);
    const badFilter = await call(inboxRoute.GET, { path: "/api/inbox?filter=everything", headers: approver.headers });
    expect(badFilter.status).toBe(400);
    expect(badFilter.json.error.message).toMatch(/filter/);
    const badLimit = await call(inboxRoute.GET, { path: "/api/inbox?limit=0", headers: approver.headers });
    expect(badLimit.status).toBe(400);
    expect((await mark(approver.headers, newId("gate"), "read")).status).toBe(404);
    expect((await mark(approver.headers, "run_not-an-item", "read")).status).toBe(404);
    expect((await inbox(approver.headers)).items.find((i) => i.id === gateId)).toMatchObject({ read: false, done: false });
  });
});

describe("done when decided, by anyone", () => {
  it("a gate approved by one approver is done for every person, without anyone marking it", async () => {
    const { runId, gateId } = await runAtGate(projectA, "Decided by someone else");
    await mark(otherApprover.headers, gateId, "read");
    const approved = await call(approveRoute.POST, { method: "POST", path: `/api/runs/${runId}/approve`, params: { id: runId }, headers: approver.headers, body: { gateId } });
    expect(approved.status, JSON.stringify(approved.json)).toBe(200);
    for (const headers of [ADMIN, approver.headers, otherApprover.headers]) {
      expect(ids(await inbox(headers))).not.toContain(gateId);
      const item = (await inbox(headers, "done")).items.find((i) => i.id === gateId);
      expect(item).toMatchObject({ done: true, doneReason: "decided", read: true });
    }
  });

  it("a question answered is done; the gates of a cancelled run are done", async () => {
    const { clarificationId } = await runAtQuestion(projectA, "Answered", "Which name?");
    expect(ids(await inbox(approver.headers))).toContain(clarificationId);
    const answered = await call(answerRoute.POST, {
      method: "POST",
      path: `/api/clarifications/${clarificationId}/answer`,
      params: { id: clarificationId },
      headers: approver.headers,
      body: { response: "Ada" },
    });
    expect(answered.status, JSON.stringify(answered.json)).toBe(200);
    expect(ids(await inbox(approver.headers))).not.toContain(clarificationId);
    expect((await inbox(approver.headers, "done")).items.find((i) => i.id === clarificationId)).toMatchObject({ doneReason: "decided" });

    const { runId, gateId } = await runAtGate(projectA, "Cancelled while waiting");
    const cancelled = await call(cancelRoute.POST, { method: "POST", path: `/api/runs/${runId}/cancel`, params: { id: runId }, headers: approver.headers, body: {} });
    expect(cancelled.status, JSON.stringify(cancelled.json)).toBeLessThan(300);
    expect(ids(await inbox(approver.headers))).not.toContain(gateId);
    expect((await inbox(approver.headers, "done")).items.find((i) => i.id === gateId)).toMatchObject({ doneReason: "decided" });
  });
});

describe("the inbox stream", () => {
  it("sends the first snapshot at once, then only when the fingerprint changes", async () => {
    const snapshots = ["a", "a", "b", "b", "b", "c"];
    let i = 0;
    const abort = new AbortController();
    const stream = inboxEventStream({
      signal: abort.signal,
      source: { snapshot: async () => ({ v: snapshots[Math.min(i++, snapshots.length - 1)] }), fingerprint: (s) => s.v! },
      sleep: async () => {
        if (i >= snapshots.length) abort.abort();
      },
    });
    const text = await new Response(stream).text();
    const data = [...text.matchAll(/^event: inbox\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!).v);
    expect(data).toEqual(["a", "b", "c"]);
    expect([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([1, 2, 3]);
  });
});

/** The caller's inbox stream, read one snapshot at a time (each message is the whole open inbox). */
async function openStream(headers: Record<string, string>) {
  const abort = new AbortController();
  const response = await streamRoute.GET(new Request(`http://127.0.0.1:3000/api/inbox/stream`, { headers, signal: abort.signal }), { params: Promise.resolve({}) });
  expect(response.status).toBe(200);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    async next(): Promise<InboxBody> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = /^data: (.*)$/m.exec(message)?.[1];
          if (/^event: inbox$/m.test(message) && data) return JSON.parse(data) as InboxBody;
          continue;
        }
        const { done, value } = await reader.read();
        if (done) throw new Error("the inbox stream ended");
        buffer += value;
      }
    },
    close: () => abort.abort(),
  };
}

describe("escalated to a backup approver (config.deadlines)", () => {
  const escalating = (to: { role: "viewer" } | { userId: string }): DecisionDeadlineInfo => ({
    // Whole seconds: the inbox answers the deadline as an ISO time.
    at: Math.ceil(Date.now() / 1000) * 1000 + 120_000,
    reminders: [],
    onTimeout: { action: "escalate", to },
  });

  it("an escalation to the viewers puts the gate in a viewer's list, counts and stream, with its deadline; before it, nothing", async () => {
    const deadline = escalating({ role: "viewer" });
    const { runId, gateId } = await runAtGate(projectA, "Escalates to the viewers", deadline);

    const forApprover = (await inbox(approver.headers)).items.find((i) => i.id === gateId);
    expect(forApprover).toMatchObject({ deadline: new Date(deadline.at).toISOString(), escalated: false, escalatedToYou: false });
    const before = await inbox(viewer.headers);
    expect(ids(before)).not.toContain(gateId);
    expect(ids(await inbox(viewer.headers, "all"))).not.toContain(gateId);
    expect((await mark(viewer.headers, gateId, "read")).status).toBe(403);
    const stream = await openStream(viewer.headers);
    try {
      expect(ids(await stream.next())).not.toContain(gateId);

      // The deadline passes: the workflow's timeout step escalates it (the same function, the same events).
      expect(await timeOut({ runId, stepKey: `test:${gateId}:timeout`, subject: { type: "gate", id: gateId }, deadline })).toMatchObject({
        kind: "escalated",
        recipients: expect.arrayContaining([viewer.id, approver.id]),
      });

      const arrived = await stream.next();
      const streamed = arrived.items.find((i) => i.id === gateId);
      expect(streamed).toMatchObject({ escalated: true, escalatedToYou: true, deadline: new Date(deadline.at).toISOString(), read: false });
      expect(arrived.open).toBe(before.open + 1);
    } finally {
      stream.close();
    }
    const after = await inbox(viewer.headers);
    expect(after.items.find((i) => i.id === gateId)).toMatchObject({ kind: "gate", escalated: true, escalatedToYou: true, link: `/runs/${runId}#gate-${gateId}` });
    expect([after.open, after.unread]).toEqual([before.open + 1, before.unread + 1]);
    expect(ids(await inbox(viewer.headers, "unread"))).toContain(gateId);
    // An approver keeps it as before, now marked escalated; someone outside the project still sees nothing.
    expect((await inbox(approver.headers)).items.find((i) => i.id === gateId)).toMatchObject({ escalated: true, escalatedToYou: false });
    const outsider = await makeUser("Outsider");
    expect(JSON.stringify(await inbox(outsider.headers, "all"))).not.toContain(gateId);
    expect((await mark(outsider.headers, gateId, "read")).status).toBe(404);

    // The backup approver may mark it, for themselves only.
    const read = await mark(viewer.headers, gateId, "read");
    expect(read.status, JSON.stringify(read.json)).toBe(200);
    expect(read.json.item).toMatchObject({ id: gateId, read: true, done: false, escalatedToYou: true });
    expect((await inbox(viewer.headers)).unread).toBe(before.unread);
    expect((await mark(viewer.headers, gateId, "done")).json.item).toMatchObject({ done: true, doneReason: "marked" });
    expect(ids(await inbox(viewer.headers))).not.toContain(gateId);
    expect(ids(await inbox(approver.headers))).toContain(gateId);
  });

  it("an escalation to a named user reaches only that member; they decide the question and it is done for them", async () => {
    const named = await makeUser("Named backup");
    await setMember({ projectId: projectA, userId: named.id, role: "viewer" });
    const deadline = escalating({ userId: named.id });
    const { runId, clarificationId } = await runAtQuestion(projectA, "Escalates to a name", "Which licence?", deadline);
    expect(ids(await inbox(named.headers, "all"))).not.toContain(clarificationId);
    await timeOut({ runId, stepKey: `test:${clarificationId}:timeout`, subject: { type: "clarification", id: clarificationId }, deadline });

    expect((await inbox(named.headers)).items.find((i) => i.id === clarificationId)).toMatchObject({
      kind: "question",
      escalatedToYou: true,
      deadline: new Date(deadline.at).toISOString(),
      link: `/runs/${runId}#question-${clarificationId}`,
    });
    // Another viewer was not named.
    expect(ids(await inbox(viewer.headers, "all"))).not.toContain(clarificationId);
    expect((await mark(viewer.headers, clarificationId, "read")).status).toBe(403);
    expect((await mark(named.headers, clarificationId, "read")).status).toBe(200);

    const answered = await call(answerRoute.POST, {
      method: "POST",
      path: `/api/clarifications/${clarificationId}/answer`,
      params: { id: clarificationId },
      headers: named.headers,
      body: { response: "MIT" },
    });
    expect(answered.status, JSON.stringify(answered.json)).toBe(200);
    expect(ids(await inbox(named.headers))).not.toContain(clarificationId);
    expect((await inbox(named.headers, "done")).items.find((i) => i.id === clarificationId)).toMatchObject({ doneReason: "decided" });
  });

  it("an escalation naming someone outside the project gives them nothing", async () => {
    const outsider = await makeUser("Named outsider");
    const deadline = escalating({ userId: outsider.id });
    const { runId, gateId } = await runAtGate(projectA, "Escalates to an outsider", deadline);
    await timeOut({ runId, stepKey: `test:${gateId}:timeout`, subject: { type: "gate", id: gateId }, deadline });
    expect(JSON.stringify(await inbox(outsider.headers, "all"))).not.toContain(gateId);
    expect((await mark(outsider.headers, gateId, "read")).status).toBe(404);
    expect(ids(await inbox(viewer.headers, "all"))).not.toContain(gateId);
  });
});
