import { describe, expect, it } from "vitest";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { POST as skipRoute } from "@/app/api/clarifications/[id]/skip/route";
import { expectRunConsistent, git, launch, newProject, startWorkflowHarness, until, waitForStatus } from "./harness";
import { afterAll, beforeAll } from "vitest";

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

async function skip(clarificationId: string) {
  const response = await skipRoute(
    new Request(`http://127.0.0.1:3000/api/clarifications/${clarificationId}/skip`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` },
    }),
    { params: Promise.resolve({ id: clarificationId }) },
  );
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function pendingQuestion(runId: string) {
  const db = await getDb();
  return until(async () => (await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, runId))).find((c) => c.status === "pending"), "a question");
}

describe("skipping a clarification: proceed with your best judgement", () => {
  it("the implementer gets the skip as its answer, notes it, and the run completes; a second skip is a 409", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    const first = await skip(question.id);
    expect(first.status).toBe(200);
    expect((await skip(question.id)).status).toBe(409);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    const events = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(events).toContain("CLARIFICATION_IGNORED");
    expect(events).not.toContain("CLARIFICATION_ANSWERED");
    // The demo implementer records the answer it got in its note: here, the instruction to use its judgement.
    const note = git(repo, "show", `${run.branch}:docs/requests/greeting.md`);
    expect(note).toMatch(/\*\*Which language\?\*\* — The person chose not to answer\. Proceed with your best judgement/);
  });

  it("a planning question skipped: the planner plans with its best judgement", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[plan-ask: Which greeting?]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    expect((await skip(question.id)).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    expect((await expectRunConsistent(run.id)).map((e) => e.type)).toContain("CLARIFICATION_IGNORED");
  });
});
