import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import * as projectsRoute from "@/app/api/projects/route";
import * as evalsRoute from "@/app/api/projects/[id]/evals/route";
import { resetEnvCache } from "@/lib/env";
import { projectRepository } from "@/scripts/eval/project";
import { listEvalReports, saveEvalReport, type EvalReport } from "@/lib/evals/results";
import { buildReport, parseRouting } from "@/scripts/eval/report";
import type { EvalResult, EvalTask } from "@/scripts/eval/run";
import { ADMIN, call, makeRepo } from "../api/helpers";

/** Eval results per routing, kept under the app's data directory and shown on the project (GET /api/projects/:id/evals). */

const BASE = { planner: "demo:default", implementer: "demo:default", validator: "demo:default" };

function result(task: string, solved: boolean, costUsd: number): EvalResult {
  return { task, source: "history", commit: "a".repeat(40), repoPath: "/tmp/x", status: "completed", solved, checkOutput: "", interventions: 1, costUsd, tokens: 100, modelCalls: 3, seconds: 2 };
}

function report(at: string): EvalReport {
  const tasks: EvalTask[] = [
    { id: "t1", description: "", source: "history", repo: { path: "/r", commit: "abc1234" }, request: "do it\n```file:a.js\nx\n```", check: "true" },
    { id: "t2", description: "", source: "history", repo: { path: "/r", commit: "abc1234" }, request: "do more", check: "true" },
  ];
  const a = parseRouting("planner=demo:default,implementer=demo:default", BASE);
  const b = parseRouting("validator=demo:default", BASE);
  return buildReport({
    at,
    tasks,
    runs: [
      { routing: a, results: [result("t1", true, 0.5), result("t2", false, 0.25)] },
      { routing: b, results: [result("t1", true, 1), result("t2", true, 1)] },
    ],
    dropped: [{ id: "h-deadbeef", source: "history", commit: "d".repeat(40), reason: "changes no test files" }],
  });
}

describe("eval results", () => {
  it("reports per routing with the per-task rows and the dropped candidates, in the --json shape", () => {
    const r = report("2026-01-01T00:00:00.000Z");
    expect(r.routings).toEqual([
      { name: "planner=demo:default,implementer=demo:default", ...BASE, tasks: 2, solved: 1, passRate: 0.5, costUsd: 0.75, tokens: 200, seconds: 4, interventions: 2 },
      { name: "validator=demo:default", ...BASE, tasks: 2, solved: 2, passRate: 1, costUsd: 2, tokens: 200, seconds: 4, interventions: 2 },
    ]);
    expect(r.tasks).toHaveLength(5);
    expect(r.tasks[0]).toEqual({ id: "t1", source: "history", commit: "a".repeat(40), valid: true, solved: true, costUsd: 0.5, tokens: 100, seconds: 2, interventions: 1, routing: "planner=demo:default,implementer=demo:default", status: "completed", reason: null });
    expect(r.tasks[4]).toMatchObject({ id: "h-deadbeef", valid: false, solved: false, routing: null, reason: "changes no test files" });
    expect(r.demo).toContain("1 of 2 here (t1)");
    expect(() => parseRouting("planer=demo:default", BASE)).toThrow(/unknown stage "planer"/);
    expect(() => parseRouting("planner", BASE)).toThrow(/is not stage=provider:model/);
  });

  it("keeps rounds per project and the project's API lists them newest first", async () => {
    const created = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body: { name: "evals", repository: { type: "local", path: makeRepo() } } });
    const projectId = created.json.project.id as string;
    const dataDir = process.env.GATEHOUSE_DATA_DIR!;
    saveEvalReport({ dataDir, projectId, report: report("2026-01-01T00:00:00.000Z") });
    saveEvalReport({ dataDir, projectId, report: report("2026-03-01T00:00:00.000Z") });
    saveEvalReport({ dataDir, projectId, report: report("2026-02-01T00:00:00.000Z") });
    // A file that is not a round (a crashed writer's leftover, a stray note) is skipped, not an error.
    fs.writeFileSync(path.join(dataDir, "evals", projectId, "junk.json"), "{");
    expect(listEvalReports({ dataDir, projectId }).map((r) => r.at)).toEqual(["2026-03-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"]);

    const res = await call(evalsRoute.GET, { path: `/api/projects/${projectId}/evals?limit=2`, params: { id: projectId }, headers: ADMIN });
    expect(res.status).toBe(200);
    expect(res.json.evals.map((r: EvalReport) => r.at)).toEqual(["2026-03-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"]);
    expect(res.json.evals[0].routings[1]).toMatchObject({ name: "validator=demo:default", solved: 2 });

    const bad = await call(evalsRoute.GET, { path: `/api/projects/${projectId}/evals?limit=0`, params: { id: projectId }, headers: ADMIN });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/limit must be a whole number from 1 to 100/);
    const other = await call(evalsRoute.GET, { path: "/api/projects/prj_nope/evals", params: { id: "prj_nope" }, headers: ADMIN });
    expect(other.status).toBe(404);
    const anonymous = await call(evalsRoute.GET, { path: `/api/projects/${projectId}/evals`, params: { id: projectId } });
    expect(anonymous.status).toBe(401);
  });

  it("finds a project's repository in the app's database for --from-history <project id>, read-only", async () => {
    const repo = makeRepo();
    const created = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body: { name: "mine me", repository: { type: "local", path: repo } } });
    const projectId = created.json.project.id as string;
    process.env.GATEHOUSE_EVAL_APP_DATABASE_URL = process.env.DATABASE_URL;
    resetEnvCache();
    try {
      expect(await projectRepository(projectId)).toEqual({ projectId, path: fs.realpathSync(repo) });
      await expect(projectRepository("prj_nope")).rejects.toThrow(/No project prj_nope in the app's database/);
    } finally {
      delete process.env.GATEHOUSE_EVAL_APP_DATABASE_URL;
      resetEnvCache();
    }
    await expect(projectRepository(projectId)).rejects.toThrow(/the app's database is unknown: run through `npm run eval`/);
  });
});
