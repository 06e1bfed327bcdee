import { beforeAll, describe, expect, it } from "vitest";
import { appendEvents, listEventsOfTypes } from "@/lib/db/event-store";
import { decisionKey, decisionSettled } from "@/lib/runs/gates/acks";
import { createRun } from "@/lib/db/queries/runs";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createProject } from "@/lib/projects/queries";
import { pausedForStorage, pausedForTimeout, readResume } from "@/lib/runs/steps/pause";

/*
 * A parallel task that meets a pause's resume late (its open was busy and it looked again after a back-off of up to five
 * minutes) must still see it, however many events the run's other tasks wrote since: these checks read the run's
 * pauses and resumes by type. They used to read a window of the last 200 (50 for a resume's own details) events, so on
 * a long parallel run a task over the stage's time could open a second timeout pause for one overrun, and a resume's
 * action ("extend") and hand-fixed plan could be lost.
 */

let projectId: string;
let userId: string;

beforeAll(async () => {
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "lookback", ownerId: userId, repository: { type: "local", path: "/tmp/lookback" } })).id;
});

/** Events the run's other tasks write meanwhile. */
const busyWork = (n: number) => Array.from({ length: n }, (_, i) => ({ type: "ARTIFACT_CREATED" as const, payload: { type: "note", path: `n${i}.md` } }));

async function pausedAndResumed(reason: "timeout" | "storage", resumeAt: number) {
  const run = await createRun({ projectId, userId, request: "Lookback", config: {} });
  await appendEvents(run.id, [
    { type: "RUN_STARTED", payload: {} },
    { type: "STAGE_STARTED", payload: { stage: "implementation", attempt: 1 } },
    { type: "RUN_PAUSED", payload: { reason, message: "paused", stage: "implementation" } },
    { type: "RUN_RESUMED", payload: { by: userId, action: "extend", at: resumeAt } },
  ]);
  return run.id;
}

describe("a pause's resume, read long after it", () => {
  it("covers a task over the stage's time 300 events later", async () => {
    const runId = await pausedAndResumed("timeout", 5_000);
    await appendEvents(runId, busyWork(300));
    expect(await pausedForTimeout({ runId, due: 4_000 })).toBe(true);
    // A resume given before the task's deadline does not cover it, near or far.
    expect(await pausedForTimeout({ runId, due: 6_000 })).toBe(false);
  });

  it("covers a task that met a full disk before a storage pause's resume, 300 events later", async () => {
    const runId = await pausedAndResumed("storage", 0);
    await appendEvents(runId, busyWork(300));
    expect(await pausedForStorage({ runId, failedAt: 0 })).toBe(true);
  });

  it("a resume's action is read 100 events after it", async () => {
    const runId = await pausedAndResumed("timeout", 5_000);
    await appendEvents(runId, busyWork(100));
    expect(await readResume({ runId })).toMatchObject({ state: "done", action: "extend", by: userId });
  });
});

describe("a resume read by a task that joined another task's pause", () => {
  it("is not acknowledged by the joiner: the re-announcer goes on until the task that opened the pause reads it", async () => {
    // Found in CI: two lanes over the stage's time; one opened the pause and its wait was stored just after the
    // resume's first announcement (Inngest's waits do not look back), the other joined the resume and acknowledged it
    // first, so the re-announcer stopped and the opener waited for its 6-hour recheck.
    const runId = await pausedAndResumed("timeout", 5_000);
    const [resume] = await listEventsOfTypes({ runId, types: ["RUN_RESUMED"] });
    const key = decisionKey.resume(resume!.sequence);
    expect(await readResume({ runId, acknowledge: false })).toMatchObject({ state: "done", action: "extend" });
    expect(await decisionSettled({ runId, key })).toBe(false);
    expect(await readResume({ runId })).toMatchObject({ state: "done", action: "extend" });
    expect(await decisionSettled({ runId, key })).toBe(true);
  });
});
