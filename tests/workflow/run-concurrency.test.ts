import { describe, expect, it } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { startRun } from "@/lib/runs/service";
import { expectRunConsistent, launch, newProject, until, useWorkflowHarness, waitForStatus } from "./harness";

/** A run's own `limits.maxConcurrency`: it computes only while fewer than that many of its user's runs compute. */

const h = useWorkflowHarness();

describe("per-run maxConcurrency", () => {
  it("a run with maxConcurrency 1 waits while another run of its user computes, then runs; runs without it are not held back", { timeout: 120_000 }, async () => {
    const { project } = await newProject(h.user);
    const auto = { trustMode: { planning: "auto" } };
    const busy = await launch(h.user, project.id, "Busy run\n[run: sleep 4]", auto);
    await until(async () => (await listEvents({ runId: busy.id })).some((e) => e.type === "TASK_STARTED"), "busy run implementing");

    const alone = await launch(h.user, project.id, "Run me alone", { ...auto, limits: { maxConcurrency: 1 } });
    const other = await launch(h.user, project.id, "An ordinary run", auto);
    // The ordinary run is under the server's limit (5) and finishes while the busy one still computes.
    expect((await waitForStatus(other.id, ["completed", "failed"])).status).toBe("completed");
    const busyEnd = await waitForStatus(busy.id, ["completed", "failed"]);
    expect(busyEnd.status).toBe("completed");
    expect((await waitForStatus(alone.id, ["completed", "failed"])).status).toBe("completed");

    // The run with maxConcurrency 1 started only once nothing else of its user computed.
    const started = (await listEvents({ runId: alone.id })).find((e) => e.type === "RUN_STARTED")!.timestamp;
    const busyDone = (await listEvents({ runId: busy.id })).find((e) => e.type === "RUN_COMPLETED")!.timestamp;
    expect(+started).toBeGreaterThanOrEqual(+busyDone);
    await expectRunConsistent(alone.id);
  });

  it("is checked like every other config key: not a whole number ≥ 1 is a 400 naming it", async () => {
    const { project } = await newProject(h.user);
    await expect(startRun({ user: h.user, projectId: project.id, request: "x", config: { limits: { maxConcurrency: 0 } } })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/limits\.maxConcurrency.*at least 1/),
    });
  });
});
