import { describe, expect, it } from "vitest";
import * as projectsRoute from "@/app/api/projects/route";
import { inngest } from "@/inngest";
import { mergeDecided } from "@/inngest/events";
import { getRunState } from "@/lib/db/event-store";
import { decideMerge } from "@/lib/runs/gates/decide-run";
import { ADMIN, call } from "../api/helpers";
import { fileBlock, git, launch, newProject, until, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

// #32 finding 3: a local project's memory showed "No memory yet" after merges — only the GitHub webhook filled it.

const h = useWorkflowHarness();

async function listedMemory(projectId: string): Promise<string | null> {
  const res = await call(projectsRoute.GET, { headers: ADMIN });
  expect(res.status).toBe(200);
  const project = (res.json.projects as Array<{ id: string; memory: string | null }>).find((p) => p.id === projectId);
  expect(project).toBeDefined();
  return project!.memory;
}

describe("a local project's memory (GET /api/projects)", () => {
  it("is main's .autonomous/memory.md once a run is squash-merged by the workflow", async () => {
    const { project, repo } = await newProject(h.user);
    expect(await listedMemory(project.id)).toBeNull();
    const run = await launch(h.user, project.id, `Add a greeting\n\n${fileBlock("src/greet.txt", "hello")}`, {
      trustMode: { planning: "auto" },
      git: { autoMerge: true },
    });
    expect((await waitForStatus(run.id, ["completed", "failed"])).merged).toBe(true);
    await waitForWorkflow(run.id);
    const onMain = git(repo, "show", "main:.autonomous/memory.md");
    expect(onMain).toContain(run.id);
    const memory = await listedMemory(project.id);
    expect(memory).toContain(run.id);
    expect(memory!.trim()).toBe(onMain.trim());
  });

  it("follows a person's merge decision: delivered unmerged, then merged, the listed memory has the run's entry", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Write it\n\n${fileBlock("src/m.txt", "m")}`, {
      trustMode: { planning: "auto" },
      git: { autoMerge: false },
    });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(run.id);
    // Delivered, not merged: main has no memory.md yet, so there is nothing to show.
    expect(() => git(repo, "show", "main:.autonomous/memory.md")).toThrow();
    expect(await listedMemory(project.id)).toBeNull();

    await decideMerge({ user: h.user, runId: run.id });
    await inngest.send(mergeDecided.create({ runId: run.id }));
    await until(async () => (await getRunState({ id: run.id }))?.merged, "the decided merge");
    await until(async () => (await listedMemory(project.id))?.includes(run.id), "the project memory after the merge");
    expect(git(repo, "show", "main:.autonomous/memory.md")).toContain(run.id);
  });
});
