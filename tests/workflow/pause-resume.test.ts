import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { appendEvents, listEvents } from "@/lib/db/event-store";
import { startRun } from "@/lib/runs/service";
import { POST as pauseRoute } from "@/app/api/runs/[id]/pause/route";
import { POST as resumeRoute } from "@/app/api/runs/[id]/resume/route";
import { expectRunConsistent, fileBlock, git, launch, newProject, postRunRoute, until, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

const h = useWorkflowHarness();

describe("a person pauses a running run and resumes it later", () => {
  it("pause parks the run at the next turn (work committed, sandbox freed); resume finishes it", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const files = Array.from({ length: 4 }, (_, i) => fileBlock(`src/f${i}.txt`, `file ${i}`)).join("\n");
    const run = await launch(h.user, project.id, `Four files\n${files}\n[run: sleep 2]`, { trustMode: { planning: "auto" } });
    await until(async () => (await listEvents({ runId: run.id })).some((e) => e.type === "TASK_STARTED"), "implementation");

    const paused = await postRunRoute(pauseRoute, run.id, { note: "lunch" });
    expect(paused.status).toBe(202);
    expect((await postRunRoute(pauseRoute, run.id)).status).toBe(409);
    const parked = await waitForStatus(run.id, ["paused", "completed"]);
    expect(parked.status).toBe("paused");
    expect(parked.pauseReason).toMatchObject({ reason: "by_person", message: expect.stringContaining("lunch") });
    // Nothing runs while paused: no workspace, nothing executing for it.
    await until(async () => !fs.existsSync(path.join(getEnv().dataDir, "workspaces", run.id)), "the sandbox to be freed");
    const log = git(repo, "log", "--format=%s", run.branch!);
    expect(log).toMatch(/WIP before pause|Task T/);

    const resumed = await postRunRoute(resumeRoute, run.id);
    expect(resumed.status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    for (let i = 0; i < 4; i++) expect(git(repo, "show", `${run.branch}:src/f${i}.txt`)).toBe(`file ${i}`);
    const types = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(types.indexOf("PAUSE_REQUESTED")).toBeLessThan(types.indexOf("RUN_PAUSED"));
    expect(types.indexOf("RUN_PAUSED")).toBeLessThan(types.indexOf("RUN_RESUMED"));
    expect(types.at(-1)).toBe("RUN_COMPLETED");
    // A finished run cannot be paused.
    const late = await postRunRoute(pauseRoute, run.id);
    expect(late.status).toBe(409);
    expect(late.body.error?.message).toMatch(/only a running run can be paused/);
  });

  it("a pause asked for during validation is honoured before delivery starts; resumed, the run delivers", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Checked file\n${fileBlock("src/checked.txt", "ok")}\n[check: sleep 5]`, { trustMode: { planning: "auto" } });
    await until(
      async () => (await listEvents({ runId: run.id })).some((e) => e.type === "STAGE_STARTED" && (e.payload as { stage?: string }).stage === "validation"),
      "validation to start",
    );
    const asked = await postRunRoute(pauseRoute, run.id, { note: "review first" });
    expect(asked.status).toBe(202);
    const parked = await waitForStatus(run.id, ["paused", "completed", "failed"]);
    expect(parked.status).toBe("paused");
    expect(parked.pauseReason).toMatchObject({ reason: "by_person", message: expect.stringContaining("review first"), stage: "delivery" });
    let types = (await listEvents({ runId: run.id })).map((e) => e.type);
    // Validation finished; delivery did not start.
    expect(types.indexOf("VALIDATION_PASSED")).toBeLessThan(types.indexOf("RUN_PAUSED"));
    expect((await listEvents({ runId: run.id })).some((e) => e.type === "STAGE_STARTED" && (e.payload as { stage?: string }).stage === "delivery")).toBe(false);

    expect((await postRunRoute(resumeRoute, run.id)).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    expect(git(repo, "show", `${run.branch}:src/checked.txt`)).toBe("ok");
    types = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(types.filter((t) => t === "RUN_PAUSED")).toHaveLength(1);
    expect(types.at(-1)).toBe("RUN_COMPLETED");
  });

  it("a pause asked for during delivery, the run's last step, is refused with a 409 that says why", async () => {
    const { project } = await newProject(h.user);
    // Not announced: the run's log is driven by hand to its delivery stage.
    const run = await startRun({ user: h.user, projectId: project.id, request: "Deliver me", config: {} });
    await appendEvents(run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "delivery" } },
    ]);
    const refused = await postRunRoute(pauseRoute, run.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error?.message).toMatch(/delivering its work .* cannot pause now; let it finish, or cancel it/);
    expect((await listEvents({ runId: run.id })).map((e) => e.type)).not.toContain("PAUSE_REQUESTED");
  });
});
