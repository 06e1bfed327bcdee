import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { query } from "@/lib/executor/store";
import { stepBudget } from "@/lib/runs/steps/context";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { inngest } from "@/inngest";
import { runCancelled } from "@/inngest/events";
import { expectRunConsistent, fileBlock, launch, newProject, processesRunning, until, waitForStatus, waitForWorkflow } from "./harness";
import { type Reply, useScriptedWorkflow } from "./model-server";

/*
 * Planning and validation fit the host's per-step duration limit as implementation does (a 2 s step budget here, in
 * strict cloud mode): a planner or validator model call still unanswered at its step's end is cut and made again in a
 * fresh step (a cut diagram retry again as the retry), and an acceptance command longer than a step runs on detached,
 * looked at in later steps, and runs once.
 */

const t = useScriptedWorkflow();
const budget = stepBudget.ms;
beforeAll(() => {
  stepBudget.ms = () => 2000;
});
afterAll(() => {
  stepBudget.ms = budget;
});

const never = () => new Promise<Reply>(() => {});
const planReply = (mermaid: string): Reply => ({
  text: JSON.stringify({
    kind: "plan",
    clarification: null,
    summary: "Write the note",
    mermaid,
    tasks: [{ id: "T1", title: "Write the note", description: "Add note.md", dependsOn: [], files: ["note.md"] }],
    acceptanceCriteria: [{ id: "AC1", description: "The note exists", command: null }],
    risks: [],
  }),
});
const PASSING: Reply = { text: JSON.stringify({ passed: true, alignmentScore: 10, rationale: "fits", findings: [], feedback: "" }) };

async function callsOf(runId: string, stage: "planning" | "validation") {
  const db = await getDb();
  return db
    .select({ status: modelCalls.status, stepKey: modelCalls.stepKey, error: modelCalls.error })
    .from(modelCalls)
    .where(and(eq(modelCalls.workflowRunId, runId), eq(modelCalls.stage, stage)));
}

async function workflowRunOf(runId: string): Promise<string> {
  const [wf] = await query<{ id: string }>(
    "SELECT id FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?",
    [runId],
  );
  return wf!.id;
}

/** How many of the workflow's memoized step results hold `fragment`. */
async function stepsWith(runId: string, fragment: string): Promise<number> {
  const [row] = await query<{ n: number }>("SELECT count(*) AS n FROM executor_steps WHERE run_id = ? AND result LIKE ?", [
    await workflowRunOf(runId),
    `%${fragment}%`,
  ]);
  return Number(row!.n);
}

describe("planning within the step budget", () => {
  it("a planner call longer than its step is cut and made again in a fresh step; a cut diagram retry resumes as the retry", { timeout: 120_000 }, async () => {
    const seen = { first: 0, retry: 0 };
    let validPrompt = "";
    t.model.respond((body) => {
      const prompt = JSON.stringify(body.messages);
      // First calls: the first never answers (only the step's budget ends it), the next returns an invalid diagram.
      // Retries (they carry the parser's error): the first never answers, the next returns a valid plan.
      if (!prompt.includes("Your previous diagram was rejected")) {
        seen.first += 1;
        return seen.first === 1 ? never() : planReply("this is not a mermaid diagram");
      }
      seen.retry += 1;
      if (seen.retry === 1) return never();
      validPrompt = prompt;
      return planReply("flowchart TD\n  A[Request] --> B[note.md]");
    });
    const { project } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, "Plan slowly", {
      trustMode: { planning: "manual" },
      modelRouting: { planner: "openai-compatible:scripted", implementer: "demo:default", validator: "demo:default" },
    });
    // The plan reaches its gate: no pause for a model failure, no invalid-plan pause.
    const waiting = await waitForStatus(run.id, ["awaiting_approval", "paused", "failed"], 90_000);
    expect(waiting.status).toBe("awaiting_approval");

    // Resumed as the retry: after the cut retry, no first call was made again (that would be a third one), and the
    // call that planned carried the parser's error about the invalid diagram.
    expect(seen).toEqual({ first: 2, retry: 2 });
    expect(validPrompt).toContain("this is not a mermaid diagram");
    // Recorded per step: each cut call as aborted, made again under the next step's key; the last one answered.
    const calls = await callsOf(run.id, "planning");
    expect(calls.at(-1)!.status).toBe("ok");
    expect(calls.at(-1)!.stepKey).toMatch(/\/plan:0:0:part:\d+:retry#\d+$/);
    for (const c of calls.filter((c) => c.status !== "ok")) expect(c.error).toMatch(/aborted/);
    expect(calls.filter((c) => c.status === "ok")).toHaveLength(2);
    expect(await stepsWith(run.id, '"kind":"step_budget"')).toBeGreaterThanOrEqual(2);
    const events = await expectRunConsistent(run.id);
    expect(events.map((e) => e.type)).not.toContain("RUN_PAUSED");
    expect(events.filter((e) => e.type === "PLAN_CREATED")).toHaveLength(1);
  });
});

describe("validation within the step budget", () => {
  it("a check longer than a step runs once, detached, across steps; a cut review call is made again without rerunning it", { timeout: 120_000 }, async () => {
    let reviews = 0;
    t.model.respond(() => {
      reviews += 1;
      // The first review call never answers: only the step's budget ends it.
      return reviews === 1 ? never() : PASSING;
    });
    const { project } = await newProject(t.h.user);
    // The check fails if it ever runs a second time (its log would then hold two lines).
    const check = `sleep 4 && echo run >> check.log && test "$(grep -c run check.log)" = 1`;
    const run = await launch(t.h.user, project.id, `Slow check\n${fileBlock("out.txt", "x")}\n[scope: check.log]\n[check: ${check}]`, {
      trustMode: { planning: "auto" },
      modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "openai-compatible:scripted" },
    });
    expect((await waitForStatus(run.id, ["completed", "failed", "paused", "awaiting_fix_decision"], 90_000)).status).toBe("completed");
    await waitForWorkflow(run.id, 60_000);
    const events = await expectRunConsistent(run.id);
    const passed = events.filter((e) => e.type === "VALIDATION_PASSED");
    expect(passed).toHaveLength(1);
    expect(events.map((e) => e.type)).not.toContain("VALIDATION_FAILED");
    // The check passed (so it ran exactly once) and the report says so.
    expect((passed[0]!.payload as { report: string }).report).toMatch(/AC\d+: .*✅ passed/);

    // Several steps: at least one ended with the check still running, one ended with the review cut.
    expect(await stepsWith(run.id, '"kind":"checks_running"')).toBeGreaterThanOrEqual(1);
    expect(await stepsWith(run.id, '"kind":"step_budget"')).toBeGreaterThanOrEqual(1);
    // The cut review is recorded as aborted; a review and an alignment call then answered, once each.
    const calls = await callsOf(run.id, "validation");
    expect(calls[0]).toMatchObject({ status: "error", error: expect.stringMatching(/aborted/) });
    expect(calls.filter((c) => c.status === "ok").map((c) => /:alignment#/.test(c.stepKey ?? ""))).toEqual([false, true]);
  });

  it("a cancel while the workflow waits between looks kills the detached check", { timeout: 120_000 }, async () => {
    t.model.respond(() => PASSING);
    const sleeper = ["sleep", "491.7"];
    const { project } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, `Slow check\n${fileBlock("out.txt", "x")}\n[check: ${sleeper.join(" ")}]`, {
      trustMode: { planning: "auto" },
      modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "openai-compatible:scripted" },
    });
    await until(async () => processesRunning(sleeper).length > 0, "the check to start");
    // Cancelled only once a step has ended with the check still running (it runs on, detached).
    await until(async () => (await stepsWith(run.id, '"kind":"checks_running"')) > 0, "a step to leave the check running");
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
    await until(async () => processesRunning(sleeper).length === 0, "the check to be killed");
  });
});
