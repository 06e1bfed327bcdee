import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { listEvents } from "@/lib/db/event-store";
import { stepBudget } from "@/lib/runs/steps/context";
import { launch, newProject, waitForStatus } from "./harness";
import { useScriptedWorkflow } from "./model-server";

/*
 * A model call is bounded by its step's time budget: one still unanswered at the end of the step is aborted, and the
 * same turn runs again in a fresh step — not a model failure, no pause.
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };
const budget = stepBudget.ms;
beforeAll(() => {
  stepBudget.ms = () => 2000;
});
afterAll(() => {
  stepBudget.ms = budget;
});

describe("a model call longer than its step", () => {
  it("is cut at the step's end and the turn is redone in a fresh step; the implementation succeeds without a pause", { timeout: 120_000 }, async () => {
    let calls = 0;
    t.model.respond((body) => {
      calls += 1;
      // The first answer never comes: only the step budget ends that call.
      if (calls === 1) return new Promise(() => {});
      const turn = (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
      if (turn === 0) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      return { text: "Done." };
    });
    const { project } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, "Slow model", { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
    // The scripted implementer skips the demo plan's note, so validation then waits for a person: not this test's point.
    expect((await waitForStatus(run.id, ["awaiting_fix_decision", "completed", "failed", "paused"], 90_000)).status).not.toMatch(/failed|paused/);

    const db = await getDb();
    const implementation = await db
      .select()
      .from(modelCalls)
      .where(and(eq(modelCalls.workflowRunId, run.id), eq(modelCalls.stage, "implementation")));
    // The cut call is recorded as aborted, then the redone turn's calls succeed.
    expect(implementation.map((c) => c.status)[0]).toBe("error");
    expect(implementation.slice(1).every((c) => c.status !== "error")).toBe(true);
    expect(calls).toBeGreaterThanOrEqual(3);
    const types = (await listEvents({ runId: run.id, limit: 1000 })).map((e) => e.type);
    expect(types).not.toContain("RUN_PAUSED");
    expect(types).toContain("IMPLEMENTATION_SUCCEEDED");
  });
});
