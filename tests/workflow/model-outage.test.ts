import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { inngest } from "@/inngest";
import { runCancelled } from "@/inngest/events";
import { POST as retryRoute } from "@/app/api/runs/[id]/retry/route";
import { expectRunConsistent, git, launch, newProject, waitForStatus, waitForWorkflow } from "./harness";
import { scriptedImplementer, useScriptedWorkflow } from "./model-server";

const t = useScriptedWorkflow();

const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };

async function callsOf(runId: string) {
  const db = await getDb();
  return db.select().from(modelCalls).where(eq(modelCalls.workflowRunId, runId));
}

async function postRetry(runId: string) {
  const response = await retryRoute(
    new Request(`http://127.0.0.1:3000/api/runs/${runId}/retry`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` },
    }),
    { params: Promise.resolve({ id: runId }) },
  );
  return { status: response.status, body: (await response.json()) as { run?: { status: string } } };
}

describe("model outage", () => {
  it("500s past the retries pause the run (model_outage); after recovery POST /retry resumes from the failed step", async () => {
    const { project, repo } = await newProject(t.h.user);
    // Retry-After keeps the model wrapper's backoff short; the retries themselves are real.
    t.model.respond(() => ({ status: 500, headers: { "retry-after": "0.01" } }));
    const run = await launch(t.h.user, project.id, "Outage test", { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
    const paused = await waitForStatus(run.id, ["paused", "failed", "completed"]);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "model_outage", stage: "implementation" });
    const failed = (await callsOf(run.id)).filter((c) => c.stage === "implementation");
    expect(failed.map((c) => [c.status, c.stepKey])).toEqual([
      ["error", `${run.id}/impl:1:turn:0#1`],
      ["error", `${run.id}/impl:1:turn:0#2`],
      ["error", `${run.id}/impl:1:turn:0#3`],
      ["error", `${run.id}/impl:1:turn:0#4`],
    ]);
    const requestsWhilePaused = t.model.requests;

    t.model.respond(scriptedImplementer("docs/requests/outage-test.md"));
    const retried = await postRetry(run.id);
    expect(retried.status).toBe(200);
    expect(retried.body.run?.status).toBe("running");
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    expect(git(repo, "show", `${run.branch}:docs/requests/outage-test.md`)).toContain("scripted model");

    const calls = await callsOf(run.id);
    // Every request the model server answered is one row; no finished step called its model again.
    const impl = calls.filter((c) => c.stage === "implementation");
    expect(impl).toHaveLength(t.model.requests);
    expect(impl.filter((c) => c.status === "error")).toHaveLength(4);
    expect(impl.filter((c) => c.status === "ok").map((c) => c.stepKey)).toEqual([
      `${run.id}/impl:1:turn:0:retry:1#1`,
      `${run.id}/impl:1:turn:1#1`,
      `${run.id}/impl:1:turn:2#1`,
    ]);
    expect(t.model.requests - requestsWhilePaused).toBe(3);
    const stepKeys = calls.map((c) => c.stepKey);
    expect(new Set(stepKeys).size).toBe(stepKeys.length);
    expect(calls.filter((c) => c.stage === "planning")).toHaveLength(1);
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "RUN_PAUSED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "RUN_RESUMED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "TASK_STARTED")).toHaveLength(1);
  });

  it("401 pauses at once (model_auth, one attempt); retry on a run that is not paused is a 409", async () => {
    const { project } = await newProject(t.h.user);
    t.model.respond(() => ({ status: 401 }));
    const run = await launch(t.h.user, project.id, "Bad key", { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
    const paused = await waitForStatus(run.id, ["paused", "failed", "completed"]);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "model_auth", stage: "implementation" });
    expect(paused.pauseReason?.message).toContain("refused the credentials (401)");
    const impl = (await callsOf(run.id)).filter((c) => c.stage === "implementation");
    expect(impl.map((c) => [c.status, c.stepKey])).toEqual([["error", `${run.id}/impl:1:turn:0#1`]]);
    // This run's planner call is recorded although the first run made a call from a step of the same name.
    expect((await callsOf(run.id)).filter((c) => c.stage === "planning").map((c) => c.stepKey)).toEqual([`${run.id}/plan:0:0#1`]);

    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
    expect((await postRetry(run.id)).status).toBe(409);
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
  });
});
