import { beforeAll, describe, expect, it } from "vitest";
import * as projectsRoute from "@/app/api/projects/route";
import * as runsRoute from "@/app/api/runs/route";
import * as runRoute from "@/app/api/runs/[id]/route";
import { appendEvents } from "@/lib/db/event-store";
import type { NewRunEvent } from "@/lib/workflow";
import { ADMIN, call, makeRepo } from "./helpers";

let projectId: string;

beforeAll(async () => {
  const res = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body: { name: "presentation", repository: { type: "local", path: makeRepo() } } });
  expect(res.status).toBe(201);
  projectId = res.json.project.id;
});

async function startRun(request: string) {
  const res = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId, request, config: { trustMode: { planning: "auto" } } } });
  expect(res.status).toBe(201);
  return res.json.run as { id: string; title: string; outcome: string | null };
}

/** Drive a run to completed through the reducer, with the validations given. */
async function finish(runId: string, validationPasses: boolean[]) {
  const events: NewRunEvent[] = [
    { type: "RUN_STARTED", payload: {} },
    { type: "STAGE_STARTED", payload: { stage: "validation" } },
    ...validationPasses.map((passed, i): NewRunEvent =>
      passed ? { type: "VALIDATION_PASSED", payload: { attempt: i + 1 } } : { type: "VALIDATION_FAILED", payload: { attempt: i + 1 } },
    ),
    { type: "RUN_COMPLETED", payload: {} },
  ];
  await appendEvents(runId, events);
}

describe("a run as the dashboard reads it", () => {
  it("has a short plain title while the request stays whole", async () => {
    const request = "## Add a **health** page\n\n```file:README.md\n# Heading inside a file\n```\n[ask: Which port? | 80 | 8080]";
    const run = await startRun(request);
    expect(run.title).toBe("Add a health page");
    const detail = await call(runRoute.GET, { headers: ADMIN, params: { id: run.id } });
    expect(detail.json.run.originalRequest).toBe(request);
    expect(detail.json.run.title).toBe("Add a health page");
  });

  it("tells a run accepted after failed validation from a clean pass, in the detail and the list", async () => {
    const clean = await startRun("Clean pass");
    const accepted = await startRun("Accepted anyway");
    await finish(clean.id, [false, true]);
    await finish(accepted.id, [true, false]);

    const one = await call(runRoute.GET, { headers: ADMIN, params: { id: accepted.id } });
    expect(one.json.run).toMatchObject({ status: "completed", lastValidation: "failed", outcome: "accepted_failed_validation" });

    const list = await call(runsRoute.GET, { headers: ADMIN, path: `/api/runs?projectId=${projectId}&status=completed` });
    const byId = new Map((list.json.runs as Array<{ id: string; outcome: string }>).map((r) => [r.id, r.outcome]));
    expect(byId.get(clean.id)).toBe("validated");
    expect(byId.get(accepted.id)).toBe("accepted_failed_validation");
  });

  it("names the people in the run instead of leaving raw user ids", async () => {
    const run = await startRun("Who is who");
    const detail = await call(runRoute.GET, { headers: ADMIN, params: { id: run.id } });
    const people = detail.json.people as Record<string, string>;
    expect(Object.keys(people)).toContain("usr_local_owner");
    expect(people.usr_local_owner).not.toBe("usr_local_owner");
  });
});
