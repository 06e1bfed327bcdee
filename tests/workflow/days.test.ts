import { createHash } from "node:crypto";
import { afterAll, afterEach, beforeAll, expect, it, vi } from "vitest";
import { setMember } from "@/lib/db/queries/members";
import { listEvents } from "@/lib/db/event-store";
import { query } from "@/lib/executor/store";
import * as decide from "@/inngest/decide";
import { makeUser } from "../auth/fixtures";
import { expectRunConsistent, git, launch, newProject, startWorkflowHarness, until, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/*
 * Days of simulated time: a run waits a week at a plan gate with deadlines, through two restarts of the executor (a
 * new executor on the same database holds nothing of the run in memory, as after a restart of the server). The clock is
 * faked (Date only, still ticking) and moved on in steps of a little over 6 hours, so every durable wait the workflow
 * holds comes due as it would in real time: the reminders, the escalation, and the 6-hour recheck of the stored decision
 * (the safety net for a lost announcement), which must fire and find nothing to do.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Move the (faked) clock on, once nothing executes: no step is mid-flight while its lease's time jumps. */
async function advanceClock(ms: number) {
  await until(async () => (await h.executor.status()).inFlight === 0, "the runs to park");
  vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() });
  vi.setSystemTime(Date.now() + ms);
}

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

async function workflowRunId(runId: string): Promise<string> {
  const rows = await query<{ id: string }>("SELECT id FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?", [runId]);
  return rows[0]!.id;
}

/** The memoized checks of the gate's stored decision (`plan-gate:<round>:decision:check:<i>`), in order: the times they ran and what they found. */
async function checks(executorRunId: string): Promise<{ i: number; state: string; now?: number }[]> {
  const rows = await query<{ hashed_id: string; result: string }>("SELECT hashed_id, result FROM executor_steps WHERE run_id = ?", [executorRunId]);
  const byHash = new Map(rows.map((r) => [r.hashed_id, r.result]));
  const found: { i: number; state: string; now?: number }[] = [];
  for (let i = 0; i < 200; i++) {
    const stored = byHash.get(sha1(`plan-gate:0:decision:check:${i}`)) ?? byHash.get(sha1(`plan-gate:1:decision:check:${i}`));
    if (stored === undefined) break;
    const parsed = JSON.parse(stored) as { data?: { state: string; now?: number }; state?: string; now?: number };
    const value = (parsed.data ?? parsed) as { state: string; now?: number };
    found.push({ i, state: value.state, now: value.now });
  }
  return found;
}

/** The workflow's open wait for the gate's announcement: when it times out (the next recheck, reminder or deadline). */
async function openWaitDue(executorRunId: string): Promise<number | null> {
  const rows = await query<{ due_at: number | null }>("SELECT due_at FROM executor_pending WHERE run_id = ? AND kind = 'wait'", [executorRunId]);
  return rows[0]?.due_at ?? null;
}

/** A wait's timeout 6 hours after the check before it (the relative "6h" is fixed when the executor stores the wait, a moment later). */
function expectRecheck(afterCheck: number) {
  expect(afterCheck).toBeGreaterThanOrEqual(6 * HOUR);
  expect(afterCheck).toBeLessThan(6 * HOUR + 60_000);
}

async function restart() {
  await until(async () => (await h.executor.status()).inFlight === 0, "the runs to park");
  await h.close();
  h = await startWorkflowHarness();
}

it(
  "a week at a plan gate with reminders and an escalation, through two restarts: every 6-hour recheck finds nothing to redo, and the decision applies once",
  { timeout: 240_000 },
  async () => {
    const { project, repo } = await newProject(h.user);
    const backup = await makeUser("Backup");
    await setMember({ projectId: project.id, userId: backup.id, role: "viewer" });
    const backupUser = { id: backup.id, name: backup.name, via: "api-token" as const };
    const run = await launch(h.user, project.id, "A week at the gate", {
      trustMode: { planning: "manual" },
      deadlines: { plan: { after: "3d", remind: ["1d", "12h before"], onTimeout: { action: "escalate", to: { userId: backup.id } } } },
    });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    const opened = (await listEvents({ runId: run.id, limit: 1000 })).find((e) => e.type === "APPROVAL_REQUESTED")!;
    const deadline = (opened.payload as { deadline: { at: number; reminders: number[] } }).deadline;
    expect(deadline.reminders).toEqual([opened.timestamp + DAY, deadline.at - 12 * HOUR].map((t) => expect.closeTo(t, -4)));
    const wf = await workflowRunId(run.id);
    await until(async () => (await openWaitDue(wf)) !== null, "the wait at the gate");
    const start = Date.now();
    // The first reminder is a day away: the wait times out for the 6-hour recheck first, not at the reminder.
    expectRecheck((await openWaitDue(wf))! - (await checks(wf)).at(-1)!.now!);

    const seen: { day: number; types: string[] }[] = [];
    let before = (await listEvents({ runId: run.id, limit: 1000 })).length;
    // 28 steps of 6 h 1 s: a little over 7 days. Restarts after day 2 and after day 5.
    for (let step = 1; step <= 28; step++) {
      const counted = (await checks(wf)).length;
      await advanceClock(6 * HOUR + 1_000);
      // The recheck fired: a new check of the stored decision ran, found it pending, and the run waits again.
      await until(async () => (await checks(wf)).length > counted && (await openWaitDue(wf)) !== null && (await h.executor.status()).inFlight === 0, `the recheck after step ${step}`);
      const events = await listEvents({ runId: run.id, limit: 1000 });
      seen.push({ day: (Date.now() - start) / DAY, types: events.slice(before).map((e) => e.type) });
      before = events.length;
      if (step === 8 || step === 20) await restart();
    }
    // What happened over the week, by the step it happened in: the first reminder after a day, the one 12 h before
    // the deadline, the escalation at 3 days, and nothing else: every other recheck found the gate pending and wrote nothing.
    const happened = seen.filter((s) => s.types.length > 0);
    expect(happened.map((s) => s.types)).toEqual([["DECISION_REMINDED"], ["DECISION_REMINDED"], ["DECISION_TIMED_OUT", "DECISION_ESCALATED"]]);
    expect(happened[0]!.day).toBeGreaterThanOrEqual(1);
    expect(happened[0]!.day).toBeLessThan(1.3);
    expect(happened[2]!.day).toBeGreaterThanOrEqual(3);
    expect(happened[2]!.day).toBeLessThan(3.3);
    expect(seen.filter((s) => s.types.length === 0)).toHaveLength(25);
    // Every check of the week found the decision pending; after the escalation, with no deadline left, each wait is a 6-hour recheck.
    const all = await checks(wf);
    expect(all.length).toBeGreaterThanOrEqual(29);
    expect(all.every((c) => c.state === "pending")).toBe(true);
    expectRecheck((await openWaitDue(wf))! - all.at(-1)!.now!);
    expect((await waitForStatus(run.id, ["awaiting_approval"])).status).toBe("awaiting_approval");

    // A week on, the backup approves (twice, as a double click would): the first applies, the second is refused.
    await decide.approve({ user: backupUser, runId: run.id, input: { gateId: gate.id, notes: "after a week" } });
    await expect(decide.approve({ user: backupUser, runId: run.id, input: { gateId: gate.id } })).rejects.toMatchObject({ status: 409 });
    expect((await waitForStatus(run.id, ["completed", "failed", "cancelled"])).status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    // Another 6 hours on: nothing is left waiting to fire again.
    await advanceClock(6 * HOUR + 1_000);
    await until(async () => (await h.executor.status()).inFlight === 0, "the executor to settle");
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
    expect(events.find((e) => e.type === "APPROVAL_GRANTED")!.payload).toMatchObject({ gateId: gate.id, by: backup.id });
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "RUN_COMPLETED")).toHaveLength(1);
    expect(git(repo, "log", "--format=%s", `main..${run.branch}`).split("\n").filter((s) => s.startsWith("Plan v"))).toHaveLength(1);
  },
);
