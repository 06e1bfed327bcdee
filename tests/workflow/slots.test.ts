import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resetEnvCache } from "@/lib/env";
import { listEvents } from "@/lib/db/event-store";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { inngest } from "@/inngest";
import { gateDecided, runCancelled } from "@/inngest/events";
import { expectRunConsistent, launch, newProject, startWorkflowHarness, until, waitForPendingGate, waitForStatus } from "./harness";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

/** MAX_CONCURRENT_RUNS_PER_USER counts runs that compute, not runs that wait for a person. */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  process.env.MAX_CONCURRENT_RUNS_PER_USER = "1";
  resetEnvCache();
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
  delete process.env.MAX_CONCURRENT_RUNS_PER_USER;
  resetEnvCache();
});

describe("concurrency slots (limit 1)", () => {
  it("runs waiting at a gate hold no slot; a run resumed while the limit is full queues with a reason, then finishes", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const manual = { trustMode: { planning: "manual" } };
    const a = await launch(h.user, project.id, "Run A", manual);
    await waitForStatus(a.id, ["awaiting_approval"]);
    // A waits for a person: B is not queued behind it.
    const b = await launch(h.user, project.id, "Run B", manual);
    await waitForStatus(b.id, ["awaiting_approval"]);

    // C computes (a command that takes a few seconds); A is approved meanwhile and must queue until C is done.
    const c = await launch(h.user, project.id, "Run C\n[run: sleep 4]", { trustMode: { planning: "auto" } });
    await until(async () => (await listEvents({ runId: c.id })).some((e) => e.type === "TASK_STARTED"), "C implementing");
    const gate = await waitForPendingGate(a.id);
    await approveGate({ user: h.user, runId: a.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: a.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    const queued = await waitForStatus(a.id, ["queued", "completed"]);
    expect(queued.status).toBe("queued");
    const reason = (await listEvents({ runId: a.id })).find((e) => e.type === "RUN_QUEUED");
    expect(reason?.payload).toMatchObject({ reason: expect.stringMatching(/free slot.*MAX_CONCURRENT_RUNS_PER_USER=1/) });

    const cEnd = await waitForStatus(c.id, ["completed", "failed"]);
    const aEnd = await waitForStatus(a.id, ["completed", "failed"]);
    if (cEnd.status !== "completed" || aEnd.status !== "completed") {
      for (const r of [a, c]) console.log(r.id, (await listEvents({ runId: r.id })).map((e) => `${e.type}:${(e.payload as { stepKey?: string }).stepKey ?? ""}`).join(" "));
    }
    expect(cEnd.status).toBe("completed");
    expect((await waitForStatus(a.id, ["completed", "failed"])).status).toBe("completed");
    const types = (await expectRunConsistent(a.id)).map((e) => e.type);
    expect(types.indexOf("RUN_QUEUED")).toBeGreaterThan(types.indexOf("APPROVAL_GRANTED"));
    expect(types.lastIndexOf("RUN_STARTED")).toBeGreaterThan(types.indexOf("RUN_QUEUED"));
    // C finished before A computed again: A's implementation started after C completed.
    const cDone = (await listEvents({ runId: c.id })).find((e) => e.type === "RUN_COMPLETED")!.timestamp;
    const aImpl = (await listEvents({ runId: a.id })).find((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation")!.timestamp;
    expect(+aImpl).toBeGreaterThanOrEqual(+cDone);

    await cancelRun({ user: h.user, runId: b.id });
    await inngest.send(runCancelled.create({ runId: b.id }));
    await waitForStatus(b.id, ["cancelled"]);
  });
});
