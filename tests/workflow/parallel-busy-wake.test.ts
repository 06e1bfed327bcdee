import { describe, expect, it } from "vitest";
import { query } from "@/lib/executor/store";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { gateDecided, runWaitClosed } from "@/inngest/events";
import { BUSY_RECHECK_MAX_S, busyRecheckSeconds } from "@/inngest/run/waits";
import { autoPlanning, expectRunConsistent, git, launch, newProject, tasksRequest, until, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { type RunEvent, eventsOf, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, items 2 and 5: a run waits for one person's decision at a time, so a parallel task that needs a person
 * while another task's gate is open waits for that gate to close. It waits for the run's announcement that the wait
 * closed (a durable waitForEvent), not by polling with sleeps: woken at once when the other gate is decided, and over
 * days it stays within Inngest Cloud's steps per run. Through the real workflow on the embedded executor, strict cloud
 * mode; the order is forced by the test's decisions, never by timing.
 */

const h = useWorkflowHarness();

type Pending = { run_id: string; hashed_id: string; kind: string; event_name: string | null; due_at: number | null };
/** The run workflow's ops that wait (sleeps, waits for events) in the executor, for Gatehouse run `runId`. */
const waitsOf = (runId: string) =>
  query<Pending>(
    "SELECT p.run_id, p.hashed_id, p.kind, p.event_name, p.due_at FROM executor_pending p JOIN executor_runs r ON r.id = p.run_id " +
      "WHERE r.fn_id LIKE '%-run-workflow' AND json_extract(r.event, '$.data.runId') = ? AND p.kind IN ('sleep', 'wait')",
    [runId],
  );

describe("a parallel task that needs a person while another task's gate is open", () => {
  it("waits for the run's wait-closed announcement and opens its own gate as soon as the other gate is decided", { timeout: 300_000 }, async () => {
    const tasks = ["# Two protected writes", "- [ ] T1: Write CI", "  Files: .github/workflows/ci.yml", "- [ ] T2: Write release", "  Files: .github/workflows/release.yml", ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Two protected writes", tasks), {
      ...autoPlanning,
      limits: { maxConcurrentTasks: 2 },
    });

    const first = await waitForPendingGate(run.id, 120_000);
    expect(first.kind).toBe("policy");
    const firstTask = taskOf((await eventsOf(run.id)).find((e) => e.type === "APPROVAL_REQUESTED")!);
    // The other task found the run busy: it waits for the announcement (no sleep), and has looked again by itself long
    // enough that its next look is at least 8 s away — a wake before that can only be the announcement.
    const parked = await until(
      async () => (await waitsOf(run.id)).find((w) => w.kind === "wait" && w.event_name === runWaitClosed.name && (w.due_at ?? 0) - Date.now() >= 8_000),
      "the other task to wait for the run's wait to close",
      120_000,
    );
    expect((await waitsOf(run.id)).filter((w) => w.kind === "sleep")).toEqual([]);

    await approveGate({ user: h.user, runId: run.id, input: { gateId: first.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: first.id, decision: "approve" }), key: decisionKey.gate(first.id) });

    const second = await until(
      async () => {
        const gate = await waitForPendingGate(run.id, 120_000);
        return gate.id !== first.id ? gate : null;
      },
      "the other task's own gate",
      120_000,
    );
    expect(second.kind).toBe("policy");
    // The parked wait ended with the announcement itself, not its time-out (which records no event).
    const [ended] = await query<{ result: string }>("SELECT result FROM executor_steps WHERE run_id = ? AND hashed_id = ?", [parked.run_id, parked.hashed_id]);
    expect(JSON.parse(ended!.result)).toMatchObject({ name: runWaitClosed.name, data: { runId: run.id } });

    await approveGate({ user: h.user, runId: run.id, input: { gateId: second.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: second.id, decision: "approve" }), key: decisionKey.gate(second.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];
    const requested = events.filter((e) => e.type === "APPROVAL_REQUESTED");
    expect(requested.map((e) => (e.payload as { kind: string }).kind)).toEqual(["policy", "policy"]);
    expect(requested.map(taskOf).sort()).toEqual(["T1", "T2"]);
    expect(taskOf(requested[0]!)).toBe(firstTask);
    expect(git(repo, "show", `${run.branch}:.github/workflows/ci.yml`)).toBe("T1: Write CI");
    expect(git(repo, "show", `${run.branch}:.github/workflows/release.yml`)).toBe("T2: Write release");
  });

  it("looks again by itself 1, 2, 4 … seconds after, then hourly: a task that waits three days behind another's question takes under 200 steps", () => {
    expect([0, 1, 2, 3, 11, 12, 13, 40].map(busyRecheckSeconds)).toEqual([1, 2, 4, 8, 2048, 3600, 3600, 3600]);
    let waited = 0;
    let looks = 0;
    while (waited < 3 * 86_400) waited += busyRecheckSeconds(looks++);
    // Each look is two steps of the run (the check and the wait).
    expect(2 * looks).toBeLessThan(200);
    expect(BUSY_RECHECK_MAX_S).toBe(3600);
  });
});
