import { describe, expect, it } from "vitest";
import { GET as inboxStream } from "@/app/api/inbox/stream/route";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as answerRoute } from "@/app/api/clarifications/[id]/answer/route";
import { setMember } from "@/lib/db/queries/members";
import type { InboxItem } from "@/lib/runs/inbox";
import { makeUser } from "../auth/fixtures";
import { expectRunConsistent, launch, newProject, useWorkflowHarness, waitForStatus } from "./harness";

/*
 * The inbox stream against a real run on the embedded executor: the question the planner asks and the plan gate it
 * opens arrive on the stream of everyone who may decide them, and leave it when decided; a viewer's stream never
 * carries them.
 */

const h = useWorkflowHarness();

const ORIGIN = "http://127.0.0.1:3000";
type Snapshot = { items: InboxItem[]; open: number; unread: number };

/** An open inbox stream, read in the background message by message (each message is one whole snapshot). */
async function openStream(headers: Record<string, string>) {
  const abort = new AbortController();
  const response = await inboxStream(new Request(`${ORIGIN}/api/inbox/stream`, { headers, signal: abort.signal }), { params: Promise.resolve({}) });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const snapshots: Snapshot[] = [];
  let ended = false;
  let wake = () => {};
  void (async () => {
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const message = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = /^data: (.*)$/m.exec(message)?.[1];
        if (/^event: inbox$/m.test(message) && data) snapshots.push(JSON.parse(data) as Snapshot);
      }
      wake();
    }
    ended = true;
    wake();
  })();
  /** The first snapshot (from the one after `from`) that passes `check`. */
  async function until(check: (s: Snapshot) => boolean, what: string, from = 0): Promise<Snapshot> {
    for (;;) {
      const found = snapshots.slice(from).find(check);
      if (found) return found;
      if (ended) throw new Error(`the stream ended before ${what}`);
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
  return { snapshots, until, close: () => abort.abort() };
}

const ofRun = (s: Snapshot, runId: string) => s.items.filter((i) => i.runId === runId);

async function post(handler: typeof approveRoute, url: string, id: string, body: unknown) {
  const response = await handler(
    new Request(`${ORIGIN}${url}`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
    { params: Promise.resolve({ id }) },
  );
  expect(response.status, await response.clone().text()).toBe(200);
}

describe("the inbox stream in a real run", () => {
  it("a planner's question and then its plan gate arrive on the deciders' streams, leave when decided; never on a viewer's", async () => {
    const { project } = await newProject(h.user);
    const approver = await makeUser("Stream approver");
    const viewer = await makeUser("Stream viewer");
    await setMember({ projectId: project.id, userId: approver.id, role: "approver" });
    await setMember({ projectId: project.id, userId: viewer.id, role: "viewer" });

    const owner = await openStream({ authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` });
    const byApprover = await openStream(approver.headers);
    const byViewer = await openStream(viewer.headers);
    try {
      // The first snapshot comes at once, before anything happens.
      await owner.until(() => true, "the first snapshot");

      const run = await launch(h.user, project.id, "Streamed inbox\n[plan-ask: Which greeting?]", { trustMode: { planning: "manual" } });
      const asked = await owner.until((s) => ofRun(s, run.id).some((i) => i.kind === "question"), "the question");
      const question = ofRun(asked, run.id)[0]!;
      expect(question).toMatchObject({ kind: "question", summary: "Which greeting?", read: false, done: false, link: `/runs/${run.id}#question-${question.id}` });
      await byApprover.until((s) => ofRun(s, run.id).some((i) => i.id === question.id), "the question for the approver");

      await post(answerRoute, `/api/clarifications/${question.id}/answer`, question.id, { response: "Hello" });
      const gated = await owner.until((s) => ofRun(s, run.id).some((i) => i.kind === "gate"), "the plan gate");
      // One item per decision: the answered question has left the open inbox as the gate arrived.
      expect(ofRun(gated, run.id).map((i) => i.kind)).toEqual(["gate"]);
      const gate = ofRun(gated, run.id)[0]!;
      expect(gate).toMatchObject({ gateKind: "plan", runTitle: "Streamed inbox", projectId: project.id, done: false });
      await byApprover.until((s) => ofRun(s, run.id).some((i) => i.id === gate.id), "the gate for the approver");

      const [ownerSeen, approverSeen] = [owner.snapshots.length, byApprover.snapshots.length];
      await post(approveRoute, `/api/runs/${run.id}/approve`, run.id, { gateId: gate.id });
      await owner.until((s) => ofRun(s, run.id).length === 0, "the decided gate to leave", ownerSeen);
      await byApprover.until((s) => ofRun(s, run.id).length === 0, "the decided gate to leave the approver's inbox", approverSeen);
      expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
      await expectRunConsistent(run.id);

      // The viewer's stream sent its snapshots all along, and none carried this run.
      expect(byViewer.snapshots.length).toBeGreaterThanOrEqual(1);
      expect(byViewer.snapshots.flatMap((s) => ofRun(s, run.id))).toEqual([]);
    } finally {
      for (const stream of [owner, byApprover, byViewer]) stream.close();
    }
  });
});
