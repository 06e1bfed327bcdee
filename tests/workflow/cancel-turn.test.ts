import { and, eq } from "drizzle-orm";
import { describe, expect, it, vi } from "vitest";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { listEvents } from "@/lib/db/event-store";
import { inngest } from "@/inngest";
import { runCancelled } from "@/inngest/events";
import { launch, newProject, processesRunning, waitForStatus } from "./harness";
import { useScriptedWorkflow } from "./model-server";

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };


/** console.error lines about a failed step or a RunEndedError: an ordinary cancellation must produce none. */
function stepErrorsIn(calls: unknown[][]): string[] {
  const text = (a: unknown) => (typeof a === "string" ? a : a instanceof Error ? `${a.name}: ${a.message}` : (JSON.stringify(a) ?? ""));
  return calls.map((args) => args.map(text).join(" ")).filter((line) => /step error|RunEndedError/.test(line));
}

async function until(what: string, check: () => boolean | Promise<boolean>) {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`still waiting for: ${what}`);
}

describe("cancel during implementation", () => {
  it("stops the turn's running command, starts no further turn and records no task, without a step error", async () => {
    const errors = vi.spyOn(console, "error");
    // A command that would outlive the test by far unless the cancellation kills it.
    const sleeper = ["sleep", "487"];
    const policy = { turns: 0 };
    t.model.respond((body) => {
      policy.turns += 1;
      const turn = (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
      if (turn === 0) {
        return {
          toolCalls: [
            { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
            { name: "run_command", arguments: { command: sleeper[0], args: sleeper.slice(1) } },
          ],
        };
      }
      return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
    });
    const { project } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, "Cancel me while I run a command", { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });

    await until("the turn's command to start", () => processesRunning(sleeper).length > 0);
    const turnsBeforeCancel = policy.turns;
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));

    await until("the command to be killed", () => processesRunning(sleeper).length === 0);
    await waitForStatus(run.id, ["cancelled"]);
    const events = (await listEvents({ runId: run.id, limit: 1000 })).map((e) => e.type);
    expect(events.at(-1)).toBe("RUN_CANCELLED");
    expect(events).not.toContain("TASK_COMPLETED");
    expect(events).not.toContain("IMPLEMENTATION_SUCCEEDED");
    expect(policy.turns).toBe(turnsBeforeCancel);
    expect(stepErrorsIn(errors.mock.calls)).toEqual([]);
    errors.mockRestore();
  });

  it("aborts a model call that is still waiting for its answer", async () => {
    const errors = vi.spyOn(console, "error");
    let held = 0;
    // The model never answers: only an abort ends the call.
    t.model.respond(() => {
      held += 1;
      return new Promise(() => {});
    });
    const { project } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, "Cancel me while the model thinks", { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
    await until("the implementer's model call to be sent", () => held > 0);
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));

    const db = await getDb();
    const implementationCalls = () => db.select().from(modelCalls).where(and(eq(modelCalls.workflowRunId, run.id), eq(modelCalls.stage, "implementation")));
    await until("the held call to end", async () => (await implementationCalls()).length > 0);
    const calls = await implementationCalls();
    expect(calls.map((c) => c.status)).toEqual(["error"]);
    expect(held).toBe(1);
    const events = (await listEvents({ runId: run.id, limit: 1000 })).map((e) => e.type);
    expect(events).not.toContain("TASK_STARTED");
    expect(events.at(-1)).toBe("RUN_CANCELLED");
    expect(stepErrorsIn(errors.mock.calls)).toEqual([]);
    errors.mockRestore();
  });
});
