import { describe, expect, it } from "vitest";
import * as projectsRoute from "@/app/api/projects/route";
import * as runsRoute from "@/app/api/runs/route";
import { ADMIN, call, makeRepo } from "./helpers";

/*
 * Issue #31, item 1: limits.maxConcurrentTasks (1–10, default 3) in the run config and the project defaults. Through
 * the routes a person's client calls: POST /api/projects (defaultConfig) and POST /api/runs (config).
 */

async function project(defaultConfig?: Record<string, unknown>) {
  const res = await call(projectsRoute.POST, {
    method: "POST",
    headers: ADMIN,
    body: { name: "parallel", repository: { type: "local", path: makeRepo() }, ...(defaultConfig ? { defaultConfig } : {}) },
  });
  return res;
}

const startRun = (projectId: string, config?: Record<string, unknown>) =>
  call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request: "Independent tasks", ...(config ? { config } : {}) } });

describe("limits.maxConcurrentTasks", () => {
  it("defaults to 3; a run's config sets it from 1 to 10; 0, 11 and 2.5 are refused with a 400 naming the field", async () => {
    const created = await project();
    expect(created.status).toBe(201);
    const projectId = created.json.project.id as string;

    const plain = await startRun(projectId);
    expect(plain.status).toBe(201);
    expect(plain.json.run.config.limits.maxConcurrentTasks).toBe(3);
    for (const n of [1, 10]) {
      const res = await startRun(projectId, { limits: { maxConcurrentTasks: n } });
      expect(res.status).toBe(201);
      expect(res.json.run.config.limits.maxConcurrentTasks).toBe(n);
    }
    for (const [n, why] of [
      [0, "at least 1"],
      [11, "at most 10"],
      [2.5, "whole number"],
    ] as const) {
      const res = await startRun(projectId, { limits: { maxConcurrentTasks: n } });
      expect(res.status).toBe(400);
      expect(res.json.error.message).toContain("maxConcurrentTasks");
      expect(res.json.error.message).toContain(why);
    }
  });

  it("a project's default applies to its runs, and a run's own config overrides it; an out-of-range default is refused", async () => {
    const created = await project({ limits: { maxConcurrentTasks: 6 } });
    expect(created.status).toBe(201);
    const projectId = created.json.project.id as string;
    expect((await startRun(projectId)).json.run.config.limits.maxConcurrentTasks).toBe(6);
    expect((await startRun(projectId, { limits: { maxConcurrentTasks: 1 } })).json.run.config.limits.maxConcurrentTasks).toBe(1);

    const refused = await project({ limits: { maxConcurrentTasks: 12 } });
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toContain("maxConcurrentTasks");
  });
});
