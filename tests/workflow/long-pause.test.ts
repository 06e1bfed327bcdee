import fs from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { query } from "@/lib/executor/store";
import { launch, newProject, until, useWorkflowHarness, waitForStatus } from "./harness";

const h = useWorkflowHarness();

it("runs waiting for a person hold no sandbox and no executing function: they are parked rows in the database", async () => {
  const { project } = await newProject(h.user);
  const runs = [];
  for (let i = 0; i < 5; i++) runs.push(await launch(h.user, project.id, `Park me ${i}`, { trustMode: { planning: "manual" } }));
  for (const run of runs) await waitForStatus(run.id, ["awaiting_approval"]);

  // Parked: once each has reached its gate (and announced its free slot), nothing of them is executing.
  await until(async () => (await h.executor.status()).inFlight === 0, "the runs to park");
  expect((await h.executor.status()).inFlight).toBe(0);
  const workspaces = path.join(getEnv().dataDir, "workspaces");
  for (const run of runs) expect(fs.existsSync(path.join(workspaces, run.id))).toBe(false);
  const parked = await query<{ status: string; n: number }>(
    "SELECT status, count(*) AS n FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') IN (" +
      runs.map(() => "?").join(",") +
      ") GROUP BY status",
    runs.map((r) => r.id),
  );
  expect(parked).toEqual([{ status: "waiting", n: 5 }]);
});
