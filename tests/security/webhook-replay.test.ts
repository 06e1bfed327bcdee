import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq, like, not } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { accounts, githubDeliveries, users, workflowRuns } from "@/lib/db/schema";
import { createProject } from "@/lib/projects/queries";
import { setMember } from "@/lib/db/queries/members";
import { resetEnvCache } from "@/lib/env";
import { handleDelivery } from "@/lib/runs/github-deliveries";
import { recordDelivery, signPayload, type ReceivedWebhook } from "@/lib/github/webhooks";
import { POST as webhook } from "@/app/api/github/webhook/route";
import { startWorkflowHarness } from "../workflow/harness";

/*
 * Finding 3: the same body and signature under a new X-GitHub-Delivery was processed again.
 * Finding 7: three signed /gatehouse comments in a row gave 5 runs (handleDelivery wrote beside the write queue, hit
 * SQLITE_BUSY after starting a run, and its retry started another).
 */

const SECRET = "whsec-replay-test-0123456789";
let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
let project: { id: string };
const ctx = { params: Promise.resolve({}) };

beforeAll(async () => {
  process.env.GITHUB_APP_WEBHOOK_SECRET = SECRET;
  resetEnvCache();
  h = await startWorkflowHarness();
  // A project bound to a GitHub repository, and a member who signed in with GitHub (no GitHub API is needed here:
  // the runs are only created, and the workflow's later GitHub calls are not under test).
  project = await createProject({
    name: "replay",
    ownerId: h.user.id,
    repository: { type: "github", owner: "acme", repo: "replay" },
    defaultConfig: { trustMode: { planning: "manual" } },
  });
  await write(async (tx) => {
    await tx.insert(users).values({ id: "usr_replay_member", name: "mona", email: "mona@example.com" });
    await tx.insert(accounts).values({ userId: "usr_replay_member", type: "oauth", provider: "github", providerAccountId: "4711" });
  });
  await setMember({ projectId: project.id, userId: "usr_replay_member", role: "approver" });
});
afterAll(async () => {
  await h.close();
});

function request(body: string | ReadableStream<Uint8Array>, headers: Record<string, string>) {
  return new Request("http://127.0.0.1/api/github/webhook", {
    method: "POST",
    headers: { "content-type": "application/json", "x-github-event": "issue_comment", ...headers },
    body,
    ...(typeof body === "string" ? {} : { duplex: "half" }),
  } as RequestInit);
}

const deliver = (body: string, id: string, signature = signPayload(SECRET, body)) =>
  webhook(request(body, { "x-github-delivery": id, "x-hub-signature-256": signature }), ctx);

const commentPayload = (text: string, commentId: number) => ({
  action: "created",
  issue: { number: 7, html_url: "https://github.example/acme/replay/issues/7" },
  comment: { id: commentId, body: `/gatehouse ${text}`, user: { login: "mona", id: 4711, type: "User" } },
  repository: { name: "replay", owner: { login: "acme" } },
});

async function projectRuns() {
  const db = await getDb();
  return db.select().from(workflowRuns).where(eq(workflowRuns.projectId, project.id));
}

describe("finding 3: webhook replay", () => {
  it("the same signed body under a new delivery id is acknowledged as a duplicate and not stored or processed again", async () => {
    const body = JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 });
    const first = await deliver(body, "replay-original");
    expect(first.status).toBe(202);
    const replayed = await deliver(body, "replay-new-id");
    expect(replayed.status).toBe(200);
    expect(await replayed.json()).toMatchObject({ duplicate: true });
    const sameId = await deliver(JSON.stringify({ zen: "different", hook_id: 2 }), "replay-original");
    expect(await sameId.json()).toMatchObject({ duplicate: true });
    const db = await getDb();
    expect(await db.select().from(githubDeliveries).where(eq(githubDeliveries.id, "replay-new-id"))).toEqual([]);
  });

  it("a request without a well-formed signature is refused before its body is read", async () => {
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(1024 * 1024));
      },
    });
    const res = await webhook(request(endless, { "x-github-delivery": "unsigned-huge" }), ctx);
    expect(res.status).toBe(401);
    expect(pulled).toBeLessThanOrEqual(2);
  });

  it("a body past the webhook limit (GATEHOUSE_WEBHOOK_MAX_BYTES) is refused with 413 while streaming, before it is all buffered", async () => {
    let sent = 0;
    const big = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent += 1024 * 1024;
        controller.enqueue(new Uint8Array(1024 * 1024).fill(32));
        if (sent > 40 * 1024 * 1024) controller.close();
      },
    });
    const res = await webhook(request(big, { "x-github-delivery": "too-big", "x-hub-signature-256": `sha256=${"0".repeat(64)}` }), ctx);
    expect(res.status).toBe(413);
    expect(sent).toBeLessThan(30 * 1024 * 1024);
    const declared = await webhook(
      request("{}", { "x-github-delivery": "too-big-2", "x-hub-signature-256": `sha256=${"0".repeat(64)}`, "content-length": String(26 * 1024 * 1024) }),
      ctx,
    );
    expect(declared.status).toBe(413);
  });
});

describe("finding 7: every side effect of a webhook is idempotent per delivery", () => {
  const received = (id: string, payload: Record<string, unknown>): ReceivedWebhook => ({
    deliveryId: id,
    event: "issue_comment",
    action: "created",
    payload,
    bodyHash: signPayload("hash", JSON.stringify(payload)).slice(7),
  });

  it("three signed /gatehouse comments in a row start exactly three runs", async () => {
    const before = (await projectRuns()).length;
    const responses = await Promise.all(
      [1, 2, 3].map((n) => deliver(JSON.stringify(commentPayload(`burst request ${n}`, 1000 + n)), `burst-${n}`)),
    );
    expect(responses.map((r) => r.status)).toEqual([202, 202, 202]);
    const db = await getDb();
    for (let i = 0; i < 200; i++) {
      const rows = await db.select().from(githubDeliveries).where(like(githubDeliveries.id, "burst-%"));
      if (rows.length === 3 && rows.every((r) => r.processedAt)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const runs = await projectRuns();
    expect(runs.length - before).toBe(3);
    expect(new Set(runs.map((r) => r.originalRequest.split("\n")[0])).size).toBe(runs.length);
  });

  it("handling one delivery again after its outcome was lost (SQLITE_BUSY, crash) or concurrently starts no second run", async () => {
    const delivery = received("retry-1", commentPayload("retried request", 2001));
    expect(await recordDelivery(delivery)).toBe(true);
    const before = (await projectRuns()).length;
    const first = await handleDelivery({ deliveryId: "retry-1" });
    expect(first.startRuns).toHaveLength(1);
    // The outcome write is what failed before: forget it, as if the step died right after starting the run.
    await write(async (tx) => {
      await tx.update(githubDeliveries).set({ processedAt: null, outcome: null }).where(eq(githubDeliveries.id, "retry-1"));
    });
    const retries = await Promise.all([1, 2, 3].map(() => handleDelivery({ deliveryId: "retry-1" })));
    for (const r of retries) expect(r.startRuns).toEqual(first.startRuns);
    expect((await projectRuns()).length - before).toBe(1);
  });

  it("the replay-guard rows are never handled as deliveries", async () => {
    const db = await getDb();
    const [marker] = await db.select().from(githubDeliveries).where(not(like(githubDeliveries.id, "%-%"))).limit(1);
    expect(marker?.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await handleDelivery({ deliveryId: marker!.id })).toEqual({ outcome: "unknown delivery", startRuns: [] });
  });
});
