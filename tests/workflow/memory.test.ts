import { describe, expect, it } from "vitest";
import { git, launch, newProject, waitForStatus, waitForWorkflow } from "./harness";
import { scriptedImplementer, useScriptedWorkflow } from "./model-server";

/** Project memory reaches the implementer, and a later run sees the previous run's entry even when it was not merged. */

const t = useScriptedWorkflow();

describe("project memory", () => {
  it("a second run's implementer prompt carries the first run's memory entry, though the first run was never merged", async () => {
    const { project, repo } = await newProject(t.h.user);
    const first = await launch(t.h.user, project.id, "First run: add the note", { trustMode: { planning: "auto" }, git: { autoMerge: false } });
    expect((await waitForStatus(first.id, ["completed", "failed"])).status).toBe("completed");
    await waitForWorkflow(first.id);
    // Not merged: main's memory does not have it, the run's branch does.
    expect(() => git(repo, "show", "main:.autonomous/memory.md")).toThrow();
    expect(git(repo, "show", `${first.branch}:.autonomous/memory.md`)).toContain(first.id);

    const prompts: string[] = [];
    const implement = scriptedImplementer("docs/requests/second-run.md");
    t.model.respond((body) => {
      prompts.push(JSON.stringify((body as { messages?: unknown[] }).messages ?? []));
      return implement(body);
    });
    const second = await launch(t.h.user, project.id, "Second run", {
      trustMode: { planning: "auto", fixes: "manual" },
      modelRouting: { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" },
    });
    await waitForStatus(second.id, ["completed", "failed", "awaiting_fix_decision"]);
    expect(prompts.length).toBeGreaterThan(0);
    expect(prompts[0]).toContain(first.id);
    expect(prompts[0]).toMatch(/First run: add the note/);
  });
});
