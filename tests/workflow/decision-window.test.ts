import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { query } from "@/lib/executor/store";
import { waitStats } from "@/lib/executor/events";
import { waitCheckHooks } from "@/lib/runs/gates/acks";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as pauseRoute } from "@/app/api/runs/[id]/pause/route";
import { POST as resumeRoute } from "@/app/api/runs/[id]/resume/route";
import { POST as skipRoute } from "@/app/api/clarifications/[id]/skip/route";
import { listEvents } from "@/lib/db/event-store";
import { expectRunConsistent, launch, newProject, startWorkflowHarness, until, waitForStatus, waitForWorkflow } from "./harness";

/*
 * Inngest's waits do not look back (inngest/inngest#1433): a decision announced after the workflow's "check the stored
 * decision" step read it as pending, but before the workflow stored its wait, is not seen by that wait. Here the
 * executor runs without look-back and a test hook decides exactly in that window (inside the check step, after its
 * read); the re-announcer must still bring the decision to the run within seconds, not at the 6-hour recheck.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness({ waitLookBack: false });
});
afterEach(() => {
  delete waitCheckHooks.afterPending;
});
afterAll(async () => {
  await h.close();
});

async function post(route: typeof approveRoute, path: string, id: string, body?: unknown) {
  const response = await route(
    new Request(`http://127.0.0.1:3000${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    { params: Promise.resolve({ id }) },
  );
  return response.status;
}

/** Decide once, inside the first check step that reads a matching decision as pending; resolves with the key. */
function decideInTheWindow(prefix: string, decide: (key: string, runId: string) => Promise<number>) {
  return new Promise<{ key: string; status: number }>((resolve) => {
    waitCheckHooks.afterPending = async ({ runId, key }) => {
      if (!key.startsWith(prefix)) return;
      delete waitCheckHooks.afterPending;
      resolve({ key, status: await decide(key, runId) });
    };
  });
}

/** The re-announcer's run for this decision, finished: it repeated the announcement until the workflow took it. */
async function reannouncer(key: string, announcedBy?: string) {
  return until(async () => {
    const [row] = await query<{ status: string; output: string | null }>(
      `SELECT status, output FROM executor_runs WHERE fn_id LIKE '%-run-decision-reannounce' AND json_extract(event, '$.data.key') = ?1
          AND (?2 IS NULL OR json_extract(event, '$.data.runId') = ?2)`,
      [key, announcedBy ?? null],
    );
    return row?.status === "completed" ? (JSON.parse(row.output ?? "null") as { settled: boolean; repeats: number }) : null;
  }, `the re-announcer of ${key}`);
}

describe("a decision announced between the check and the wait, with no wait look-back", () => {
  it("a plan gate approved in the window reaches the run (re-announced), and the run completes", { timeout: 120_000 }, async () => {
    const fromHistory = waitStats.fromHistory;
    const decided = decideInTheWindow("gate:", (key, runId) =>
      post(approveRoute, `/api/runs/${runId}/approve`, runId, { gateId: key.slice("gate:".length) }),
    );
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Add a greeting");
    const { key, status } = await decided;
    expect(status).toBe(200);
    // 60 s only bounds a failure: without the re-announcer the run would sit until the 6-hour recheck.
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    expect(await reannouncer(key)).toEqual({ settled: true, repeats: expect.any(Number) });
    expect((await reannouncer(key)).repeats).toBeGreaterThanOrEqual(1);
    expect(waitStats.fromHistory).toBe(fromHistory);
    await expectRunConsistent(run.id);
  });

  it("a question skipped in the window reaches the run", { timeout: 120_000 }, async () => {
    const decided = decideInTheWindow("clarification:", (key) => {
      const id = key.slice("clarification:".length);
      return post(skipRoute, `/api/clarifications/${id}/skip`, id);
    });
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" } });
    const { key, status } = await decided;
    expect(status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    expect((await reannouncer(key)).repeats).toBeGreaterThanOrEqual(1);
    expect((await expectRunConsistent(run.id)).map((e) => e.type)).toContain("CLARIFICATION_IGNORED");
  });

  it("a paused run resumed in the window reaches the run", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Two files\n```file:a.txt\na\n```\n```file:b.txt\nb\n```\n[run: sleep 2]", {
      trustMode: { planning: "auto" },
    });
    await until(async () => (await listEvents({ runId: run.id })).some((e) => e.type === "TASK_STARTED"), "implementation");
    const decided = decideInTheWindow("resume", (_key, runId) => post(resumeRoute, `/api/runs/${runId}/resume`, runId));
    expect(await post(pauseRoute, `/api/runs/${run.id}/pause`, run.id, { note: "a moment" })).toBe(202);
    expect((await decided).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const resumedAt = (await listEvents({ runId: run.id })).find((e) => e.type === "RUN_RESUMED")!.sequence;
    expect((await reannouncer(`resume:${resumedAt}`)).repeats).toBeGreaterThanOrEqual(1);
    await expectRunConsistent(run.id);
  });

  it("a slot freed between a queued run's check and its wait reaches the run", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const config = { trustMode: { planning: "auto" }, limits: { maxConcurrency: 1 } };
    const first = await launch(h.user, project.id, "First\n[run: sleep 2]", config);
    await waitForStatus(first.id, ["running"]);
    let held = false;
    waitCheckHooks.afterPending = async ({ runId, key }) => {
      if (key !== "slot" || runId === first.id) return;
      delete waitCheckHooks.afterPending;
      held = true;
      // The second run read "no free slot"; the first now finishes and announces its free slot before the wait exists.
      await waitForWorkflow(first.id, 60_000);
    };
    const second = await launch(h.user, project.id, "Second", config);
    expect((await waitForStatus(second.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    expect(held).toBe(true);
    // The free slot was announced again once the second run's wait existed.
    expect((await reannouncer(`slot:${h.user.id}`, first.id)).repeats).toBeGreaterThanOrEqual(1);
  });
});
