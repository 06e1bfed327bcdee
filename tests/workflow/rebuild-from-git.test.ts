import fs from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as detailRoute } from "@/app/api/runs/[id]/route";
import { GET as eventsRoute } from "@/app/api/runs/[id]/events/route";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as rejectRoute } from "@/app/api/runs/[id]/reject/route";
import { POST as fixRoute } from "@/app/api/runs/[id]/fix-decision/route";
import { POST as answerRoute } from "@/app/api/clarifications/[id]/answer/route";
import { closeDb, getDb } from "@/lib/db";
import { clarificationRequests, gates, modelCalls, workflowRuns } from "@/lib/db/schema";
import { getEnv } from "@/lib/env";
import { rebuildFromGit } from "@/lib/git";
import { eq } from "drizzle-orm";
import { expectRunConsistent, launch, newProject, startWorkflowHarness, until, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { ADMIN, call } from "../api/helpers";

/**
 * Item 3 of #35: `npm run rebuild-from-git` restores everything a real run recorded — proven on the records of a run
 * driven through the workflow (a plan rejected, then approved at a manual gate, a question answered, a fix decision,
 * a merge): after the database is lost and rebuilt, the API's run detail, gates, costs and events equal what they were.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>> | null = null;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h?.close();
});

type Handler = Parameters<typeof call>[0];
async function post(handler: Handler, path: string, params: Record<string, string>, body: unknown) {
  const r = await call(handler, { method: "POST", path, params, headers: ADMIN, body });
  expect(r.status, JSON.stringify(r.json)).toBe(200);
}

async function apiView(runId: string) {
  const detail = await call(detailRoute, { path: `/api/runs/${runId}`, params: { id: runId }, headers: ADMIN });
  const events = await call(eventsRoute, { path: `/api/runs/${runId}/events?limit=1000`, params: { id: runId }, headers: ADMIN });
  expect(detail.status).toBe(200);
  expect(events.status).toBe(200);
  return { detail: detail.json, events: events.json };
}

describe("rebuild from git restores a real run", () => {
  it("a rejection, an approval, an answered question, a fix decision and a merge: detail, gates, costs and events equal after the rebuild", { timeout: 300_000 }, async () => {
    const { project, repo } = await newProject(h!.user);
    const run = await launch(h!.user, project.id, "Greeting\n[ask: Which language? | English | French]\n[fail-validation: 1]", {
      trustMode: { planning: "manual", fixes: "manual" },
      git: { autoMerge: true },
    });
    const id = { id: run.id };
    const first = await waitForPendingGate(run.id, 120_000);
    await post(rejectRoute, `/api/runs/${run.id}/reject`, id, { gateId: first.id, feedback: "Say hello in the note." });
    const second = await until(async () => {
      const g = await waitForPendingGate(run.id);
      return g.id !== first.id ? g : null;
    }, "the second plan gate", 120_000);
    await post(approveRoute, `/api/runs/${run.id}/approve`, id, { gateId: second.id, notes: "Fine" });

    // Each implementation attempt asks the question (answered each time); the first validation fails: retried.
    const db = await getDb();
    let fixed = false;
    for (;;) {
      const now = await waitForStatus(run.id, ["awaiting_clarification", "awaiting_fix_decision", "completed", "failed"], 120_000);
      if (now.status === "completed" || now.status === "failed") break;
      if (now.status === "awaiting_fix_decision") {
        expect(fixed).toBe(false);
        fixed = true;
        await post(fixRoute, `/api/runs/${run.id}/fix-decision`, id, { decision: "retry", notes: "Try once more" });
      } else {
        const rows = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id));
        const question = rows.find((c) => c.status === "pending")!;
        await post(answerRoute, `/api/clarifications/${question.id}/answer`, { id: question.id }, { response: "French" });
      }
      // The decision's event moved the run on in the same transaction: the next wait sees its next state.
    }
    expect(fixed).toBe(true);
    expect((await waitForStatus(run.id, ["completed", "failed"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const types = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(["APPROVAL_REJECTED", "APPROVAL_GRANTED", "CLARIFICATION_ANSWERED", "FIX_DECISION_MADE", "PR_MERGED", "RUN_COMPLETED"]));

    const before = await apiView(run.id);
    const detail = before.detail as { gates: unknown[]; cost: { calls: number; tokensIn: number }; clarifications: unknown[] };
    expect(detail.gates).toHaveLength(3);
    expect(detail.cost.calls).toBeGreaterThan(0);
    expect(detail.clarifications).toHaveLength(2);

    // The database is lost: the executor stops, the file goes.
    await h!.close();
    h = null;
    closeDb();
    const file = getEnv().databaseUrl.slice("file:".length);
    for (const suffix of ["", "-wal", "-shm"]) await fs.rm(file + suffix, { force: true });
    const empty = await getDb();
    expect(await empty.select().from(workflowRuns)).toHaveLength(0);

    const result = await rebuildFromGit({ repoPath: repo });
    expect(result.errors).toEqual([]);
    expect(result).toMatchObject({ runs: 1, gates: 3, modelCalls: detail.cost.calls });
    expect(await empty.select().from(gates)).toHaveLength(3);
    expect(await empty.select().from(modelCalls)).toHaveLength(detail.cost.calls);
    const after = await apiView(run.id);
    expect(after.detail).toEqual(before.detail);
    expect(after.events).toEqual(before.events);
  });
});
