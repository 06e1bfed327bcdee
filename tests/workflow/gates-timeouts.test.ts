import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { approveGate, rejectGate } from "@/lib/runs/gates/decide-gate";
import { cancelRun, resumeRun } from "@/lib/runs/gates/decide-run";
import { workflowClock } from "@/lib/runs/steps/context";
import { listEvents } from "@/lib/db/event-store";
import { getDb } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { inngest } from "@/inngest";
import { gateDecided, runCancelled, runResumed } from "@/inngest/events";
import {
  expectRunConsistent,
  fileBlock,
  git,
  launch,
  newProject,
  until,
  waitForPendingGate,
  waitForStatus,
  waitForWorkflow,
} from "./harness";
import { scriptedImplementer, type Reply, useScriptedWorkflow } from "./model-server";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

const t = useScriptedWorkflow();

const workspace = (runId: string) => path.join(getEnv().dataDir, "workspaces", runId);
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };

/** A deferred reply: the model server holds a request until the test releases it. */
function held() {
  let release!: (reply: Reply) => void;
  let arrived!: () => void;
  const reply = new Promise<Reply>((r) => (release = r));
  const seen = new Promise<void>((r) => (arrived = r));
  return { reply, seen, arrived, release };
}

describe("implementation gate (trustMode.implementation = manual)", () => {
  it("the diff waits for approval before delivery; approve → delivered and completed", async () => {
    const { project, repo } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, `Add a file\n\n${fileBlock("src/a.txt", "alpha")}`, {
      trustMode: { planning: "auto", implementation: "manual" },
    });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("implementation");
    expect((gate.context as { diffStat: string }).diffStat).toContain("src/a.txt");
    // Nothing is delivered while the gate waits, and the sandbox is parked.
    let events = await listEvents({ runId: run.id, limit: 1000 });
    expect(events.map((e) => e.type)).not.toContain("VALIDATION_PASSED");
    expect(events.filter((e) => e.type === "STAGE_STARTED" && e.payload.stage === "delivery")).toHaveLength(0);
    expect(fs.existsSync(workspace(run.id))).toBe(false);

    await approveGate({ user: t.h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    expect(git(repo, "show", `${run.branch}:src/a.txt`)).toBe("alpha");
    events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    expect(types.indexOf("APPROVAL_GRANTED")).toBeLessThan(types.indexOf("VALIDATION_PASSED"));
    expect(types.filter((t) => t === "IMPLEMENTATION_SUCCEEDED")).toHaveLength(1);
  });

  it("reject with feedback → implementation runs again, then a new gate; approve completes", async () => {
    const { project } = await newProject(t.h.user);
    const run = await launch(t.h.user, project.id, `Add b\n\n${fileBlock("src/b.txt", "beta")}`, {
      trustMode: { planning: "auto", implementation: "manual" },
    });
    const first = await waitForPendingGate(run.id);
    expect(first.kind).toBe("implementation");
    await rejectGate({ user: t.h.user, runId: run.id, input: { gateId: first.id, feedback: "Use a different greeting" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: first.id, decision: "reject" }), key: decisionKey.gate(first.id) });

    const second = await until(async () => {
      const g = await waitForPendingGate(run.id);
      return g.id !== first.id ? g : null;
    }, "the second implementation gate");
    expect(second.kind).toBe("implementation");
    const beforeApprove = await listEvents({ runId: run.id, limit: 1000 });
    const implStarts = beforeApprove.filter((e) => e.type === "STAGE_STARTED" && e.payload.stage === "implementation");
    expect(implStarts.map((e) => (e.payload as { attempt?: number }).attempt)).toEqual([1, 2]);
    expect(beforeApprove.filter((e) => e.type === "APPROVAL_REJECTED")).toHaveLength(1);

    await approveGate({ user: t.h.user, runId: run.id, input: { gateId: second.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: second.id, decision: "approve" }), key: decisionKey.gate(second.id) });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "IMPLEMENTATION_SUCCEEDED")).toHaveLength(2);
    expect(events.filter((e) => e.type === "VALIDATION_PASSED")).toHaveLength(1);
  });
});

describe("stage timeouts (timeoutMinutes)", () => {
  /** The first implementer turn is answered only after the test moved the workflow's clock 2 minutes on. */
  async function runOverImplementation() {
    const { project, repo } = await newProject(t.h.user);
    const slow = held();
    const script = scriptedImplementer("docs/requests/slow-work.md");
    let first = true;
    t.model.respond((body) => {
      if (!first) return script(body);
      first = false;
      slow.arrived();
      return slow.reply;
    });
    const run = await launch(t.h.user, project.id, "Slow work", {
      trustMode: { planning: "auto" },
      timeoutMinutes: { implementation: 1 },
      modelRouting: SCRIPTED,
    });
    await slow.seen;
    const offset = 2 * 60_000;
    workflowClock.now = () => Date.now() + offset;
    slow.release(script({ messages: [] }));
    const paused = await waitForStatus(run.id, ["paused", "failed", "completed"]);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "implementation" });
    expect(paused.pauseReason?.message).toContain("1 minutes");
    expect(fs.existsSync(workspace(run.id))).toBe(false);
    return { run, repo };
  }

  it("an implementation that runs over pauses with reason timeout; extend continues to completion", async () => {
    const { run, repo } = await runOverImplementation();
    const resumed = await resumeRun({ user: t.h.user, runId: run.id, action: "extend" });
    await announceDecision({ event: runResumed.create({ runId: run.id, action: "extend" }), key: decisionKey.resume(resumed.lastSequence) });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    expect(git(repo, "show", `${run.branch}:docs/requests/slow-work.md`)).toContain("scripted model");
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "RUN_PAUSED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "RUN_RESUMED").map((e) => (e.payload as { action: string }).action)).toEqual(["extend"]);
    // The work done before the pause was kept: the turn that ran over is not repeated.
    expect(events.filter((e) => e.type === "TASK_STARTED")).toHaveLength(1);
  });

  it("a model call that never answers is cut at the stage deadline: the run pauses (timeout) instead of hanging", async () => {
    const { project } = await newProject(t.h.user);
    let held = 0;
    // The implementer's model never answers: only the stage deadline can end this turn.
    t.model.respond(() => {
      held++;
      return new Promise(() => {});
    });
    const run = await launch(t.h.user, project.id, "Hung model", {
      trustMode: { planning: "auto" },
      timeoutMinutes: { implementation: 1 },
      modelRouting: SCRIPTED,
    });
    for (const end = Date.now() + 30_000; held === 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(held).toBe(1);
    workflowClock.now = () => Date.now() + 2 * 60_000;
    const paused = await waitForStatus(run.id, ["paused", "failed", "completed"], 30_000);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "timeout", stage: "implementation" });
    expect(held).toBe(1);
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
  });

  it("a timed-out run is cancelled: it ends cancelled with the branch kept", async () => {
    const { run, repo } = await runOverImplementation();
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
    await waitForWorkflow(run.id);
    expect(git(repo, "branch", "--list", run.branch!)).toContain(run.branch!);
    expect(fs.existsSync(workspace(run.id))).toBe(false);
    await expectRunConsistent(run.id);
  });
});

describe("cancel mid-implementation", () => {
  it("cancelling while a model turn is running ends the run cancelled, removes the sandbox, keeps the branch", async () => {
    const { project, repo } = await newProject(t.h.user);
    const turn = held();
    const script = scriptedImplementer("docs/requests/cancel-me.md");
    let calls = 0;
    t.model.respond((body) => {
      calls++;
      // The second turn (T1 started and its file written) is the one in flight when the cancel comes.
      if (calls !== 2) return script(body);
      turn.arrived();
      return turn.reply;
    });
    const run = await launch(t.h.user, project.id, "Cancel me", { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
    await turn.seen;
    expect(fs.existsSync(workspace(run.id))).toBe(true);
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
    expect(await waitForWorkflow(run.id)).toBe("cancelled");
    // The turn in flight finishes after the cancellation: none of it is recorded, and the sandbox is gone.
    turn.release(script({ messages: [{ role: "assistant", tool_calls: [{}] }] }));
    await until(async () => !fs.existsSync(workspace(run.id)) && !fs.existsSync(`${workspace(run.id)}.home`), "the sandbox to be removed");
    await until(async () => {
      try {
        return JSON.parse(git(repo, "show", `${run.branch}:.autonomous/runs/${run.id}/context.json`)).status === "cancelled";
      } catch {
        return false;
      }
    }, "the cancelled run's records on its branch");
    expect(git(repo, "branch", "--list", run.branch!)).toContain(run.branch!);
    const events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    expect(types.at(-1)).toBe("RUN_CANCELLED");
    expect(types).not.toContain("TASK_COMPLETED");
  });
});

describe("decision races", () => {
  // Generous bounds: 20 whole runs beside five tight pollers take 65–95 s on a quiet 2-core machine and far longer on a
  // loaded one. What is asserted is that no decision is lost, not how fast the runs finish.
  it("an approve stored and announced the instant the gate appears is never lost (20 runs)", { timeout: 900_000 }, async () => {
    const { project } = await newProject(t.h.user);
    const db = await getDb();
    const one = async (i: number) => {
      const run = await launch(t.h.user, project.id, `Race ${i}`, { trustMode: { planning: "manual" } });
      let gate: typeof gates.$inferSelect | undefined;
      // Tight polling: decide in the same tick the gate row becomes visible.
      while (!gate) {
        [gate] = await db.select().from(gates).where(eq(gates.workflowRunId, run.id));
        if (!gate) await new Promise((r) => setImmediate(r));
      }
      await approveGate({ user: t.h.user, runId: run.id, input: { gateId: gate.id } });
      await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
      return run;
    };
    const runs = [];
    for (let batch = 0; batch < 4; batch++) runs.push(...(await Promise.all([0, 1, 2, 3, 4].map((j) => one(batch * 5 + j)))));
    for (const run of runs) {
      expect((await waitForStatus(run.id, ["completed", "failed"], 600_000)).status).toBe("completed");
      await waitForWorkflow(run.id);
      const events = await expectRunConsistent(run.id);
      expect(events.filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
      expect(events.filter((e) => e.type === "APPROVAL_REQUESTED")).toHaveLength(1);
    }
  });
});
