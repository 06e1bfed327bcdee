import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { listEvents } from "@/lib/db/queries/runs";
import { POST as pauseRoute } from "@/app/api/runs/[id]/pause/route";
import { POST as resumeRoute } from "@/app/api/runs/[id]/resume/route";
import { expectRunConsistent, fileBlock, git, launch, newProject, startWorkflowHarness, until, waitForStatus, waitForWorkflow } from "./harness";

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
});

async function post(route: typeof pauseRoute, runId: string, body?: unknown) {
  const response = await route(
    new Request(`http://127.0.0.1:3000/api/runs/${runId}/x`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    { params: Promise.resolve({ id: runId }) },
  );
  return { status: response.status, body: (await response.json()) as { run?: { status: string }; error?: { message: string } } };
}

describe("a person pauses a running run and resumes it later", () => {
  it("pause parks the run at the next turn (work committed, sandbox freed); resume finishes it", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const files = Array.from({ length: 4 }, (_, i) => fileBlock(`src/f${i}.txt`, `file ${i}`)).join("\n");
    const run = await launch(h.user, project.id, `Four files\n${files}\n[run: sleep 2]`, { trustMode: { planning: "auto" } });
    await until(async () => (await listEvents({ runId: run.id })).some((e) => e.type === "TASK_STARTED"), "implementation");

    const paused = await post(pauseRoute, run.id, { note: "lunch" });
    expect(paused.status).toBe(202);
    expect((await post(pauseRoute, run.id)).status).toBe(409);
    const parked = await waitForStatus(run.id, ["paused", "completed"]);
    expect(parked.status).toBe("paused");
    expect(parked.pauseReason).toMatchObject({ reason: "by_person", message: expect.stringContaining("lunch") });
    // Nothing runs while paused: no workspace, nothing executing for it.
    await until(async () => !fs.existsSync(path.join(getEnv().dataDir, "workspaces", run.id)), "the sandbox to be freed");
    const log = git(repo, "log", "--format=%s", run.branch!);
    expect(log).toMatch(/WIP before pause|Task T/);

    const resumed = await post(resumeRoute, run.id);
    expect(resumed.status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    for (let i = 0; i < 4; i++) expect(git(repo, "show", `${run.branch}:src/f${i}.txt`)).toBe(`file ${i}`);
    const types = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(types.indexOf("PAUSE_REQUESTED")).toBeLessThan(types.indexOf("RUN_PAUSED"));
    expect(types.indexOf("RUN_PAUSED")).toBeLessThan(types.indexOf("RUN_RESUMED"));
    expect(types.at(-1)).toBe("RUN_COMPLETED");
    // A finished run cannot be paused.
    const late = await post(pauseRoute, run.id);
    expect(late.status).toBe(409);
    expect(late.body.error?.message).toMatch(/only a running run can be paused/);
  });
});
