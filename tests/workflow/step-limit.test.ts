import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { launch, newProject, startWorkflowHarness, tasksRequest, waitForStatus } from "./harness";

/**
 * Inngest ends a function run at 1,000 steps (strict cloud mode enforces it, here with a small limit): a run whose plan
 * takes more fails, and its failure says what happened and what to do, not only Inngest's error.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness({ limits: { maxSteps: 20 } });
});
afterAll(async () => {
  await h.close();
});

describe("a run over Inngest's steps per run", () => {
  it("fails with a reason that names the limit, the tasks it got through and how to go on", { timeout: 120_000 }, async () => {
    const tasks = ["# Many", ...Array.from({ length: 12 }, (_, i) => [`- [ ] T${i + 1}: Write file ${i + 1}`, `  Files: f${i + 1}.txt`]).flat(), ""].join("\n");
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Many", tasks), {
      trustMode: { planning: "auto", fixes: "manual" },
      limits: { maxConcurrentTasks: 3 },
    });
    await waitForStatus(run.id, ["failed"], 90_000);
    const events = await listEvents({ runId: run.id, limit: 1000 });
    const failed = events.find((e) => e.type === "RUN_FAILED");
    const reason = (failed?.payload as { reason?: string } | undefined)?.reason ?? "";
    // Inngest's words first, then what they mean for this run and what to do.
    expect(reason.startsWith("The function run exceeded the step limit of 20 steps.")).toBe(true);
    expect(reason).toContain("Inngest ends one function run at 20 steps, and every model turn of every task is a step.");
    const completed = new Set(events.filter((e) => e.type === "TASK_COMPLETED").map((e) => (e.payload as { taskId: string }).taskId)).size;
    const started = new Set(events.filter((e) => e.type === "TASK_STARTED").map((e) => (e.payload as { taskId: string }).taskId)).size;
    // Stopped part-way: some tasks done, not all twelve.
    expect(started).toBeGreaterThan(0);
    expect(completed).toBeLessThan(12);
    const branch = (await getRunState({ id: run.id }))?.branch;
    expect(branch).toBeTruthy();
    expect(reason).toContain(`It completed ${completed} of the ${started} tasks it started; their work stays on the branch ${branch}.`);
    expect(reason).toContain("Split the request into smaller runs, or allow fewer turns per task (limits.maxIterations).");
  });
});
