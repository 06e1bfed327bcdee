import { expect, it } from "vitest";
import * as diffRoute from "@/app/api/runs/[id]/diff/route";
import { ADMIN, call } from "../api/helpers";
import { launch, newProject, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

const h = useWorkflowHarness();

it("GET /api/runs/:id/diff shows the branch's code changes against its starting commit, without .autonomous records", async () => {
  const { project } = await newProject(h.user);
  const before = await launch(h.user, project.id, "Queued run", { trustMode: { planning: "manual" } });
  await waitForStatus(before.id, ["awaiting_approval"]);
  const empty = await call(diffRoute.GET, { headers: ADMIN, params: { id: before.id } });
  expect(empty.status).toBe(200);
  expect(empty.json.diff).toBe("");

  const run = await launch(h.user, project.id, ["Add a file", "```file:src/hello.txt", "hi there", "```"].join("\n"), {
    trustMode: { planning: "auto" },
  });
  await waitForStatus(run.id, ["completed"]);
  await waitForWorkflow(run.id);
  const res = await call(diffRoute.GET, { headers: ADMIN, params: { id: run.id } });
  expect(res.status).toBe(200);
  expect(res.json.diff).toContain("+++ b/src/hello.txt");
  expect(res.json.diff).toContain("+hi there");
  expect(res.json.diff).not.toContain(".autonomous/");
  expect(res.json.base).toMatch(/^[0-9a-f]{40}$/);
  expect(res.json.head).toMatch(/^[0-9a-f]{40}$/);

  const stranger = await call(diffRoute.GET, { headers: { authorization: "Bearer nope-nope-nope-nope" }, params: { id: run.id } });
  expect(stranger.status).toBe(401);
});
