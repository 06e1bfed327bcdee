import fs from "node:fs/promises";
import { asc, eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { closeDb, getDb, write } from "@/lib/db";
import { createProject } from "@/lib/projects/queries";
import { createRun, listRuns } from "@/lib/db/queries/runs";
import { appendEvents, listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { clarificationRequests, workflowRuns } from "@/lib/db/schema";
import { getEnv } from "@/lib/env";
import { buildRunContext, clarificationFromRow, commitRunRecords, createRunBranch, rebuildFromGit, squashMerge } from "@/lib/git";
import { git } from "@/lib/git/run";
import type { NewRunEvent } from "@/lib/workflow";
import { makeRepo } from "./helpers";

let repo: string;
let projectId: string;
let userId: string;

beforeAll(async () => {
  repo = await makeRepo();
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "demo", ownerId: userId, repository: { type: "local", path: repo } })).id;
});

/** Drive a run through events, then commit its records on its branch the way the workflow does at the end. */
async function recordRun(request: string, events: (ids: { clarificationId: string }) => NewRunEvent[], withClarification = false) {
  const run = await createRun({ projectId, userId, request, config: { maxClarifications: 2 } });
  const { branch } = await createRunBranch({ repoPath: repo, runId: run.id, request, baseBranch: "main" });
  const clarificationId = `clr_${run.id.slice(4)}`;
  const list = events({ clarificationId });
  for (const event of list) {
    if (withClarification && event.type === "CLARIFICATION_REQUESTED") {
      await write((tx) =>
        tx.insert(clarificationRequests).values({
          id: clarificationId, workflowRunId: run.id, stage: "planning", question: "Which port?", context: "The server needs one",
          options: ["3000", "8080"], responseType: "single_choice", status: "pending",
        }),
      );
    }
    await appendEvents(run.id, [event]);
    if (withClarification && event.type === "CLARIFICATION_ANSWERED") {
      await write((tx) =>
        tx.update(clarificationRequests).set({ status: "answered", response: "8080", answeredBy: userId, answeredAt: new Date() }).where(eq(clarificationRequests.id, clarificationId)),
      );
    }
  }
  const db = await getDb();
  const rows = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id));
  const stored = await listEvents({ runId: run.id });
  const context = buildRunContext({ events: stored, clarifications: rows.map(clarificationFromRow), baseBranch: "main" });
  await commitRunRecords({ repoPath: repo, branch, context, validationReport: `# ${context.status}\n`, events: stored });
  return { run, branch };
}

async function snapshot() {
  const db = await getDb();
  const { runs } = await listRuns({ projectIds: [projectId], limit: 100 });
  const events = Object.fromEntries(await Promise.all(runs.map(async (r) => [r.id, await listEvents({ runId: r.id })] as const)));
  const clarifications = await db.select().from(clarificationRequests).orderBy(asc(clarificationRequests.id));
  return { runs, events, clarifications };
}

describe("rebuild from git", () => {
  it("after the database is deleted, runs, event logs and clarifications are rebuilt from the .autonomous/ records", async () => {
    const planning: NewRunEvent = { type: "STAGE_STARTED", payload: { stage: "planning" } };
    const completed = await recordRun("Completed and merged", (): NewRunEvent[] => [
      { type: "RUN_STARTED", payload: {} },
      planning,
      { type: "STAGE_STARTED", payload: { stage: "implementation" } },
      { type: "TASK_COMPLETED", payload: { taskId: "T1", commitSha: null } },
      { type: "RUN_COMPLETED", payload: { summary: "ok" } },
    ]);
    await recordRun("This one fails", (): NewRunEvent[] => [
      { type: "RUN_STARTED", payload: {} },
      planning,
      { type: "RUN_FAILED", payload: { reason: "model outage", stage: "planning" } },
    ]);
    await recordRun(
      "Needs an answer",
      ({ clarificationId }): NewRunEvent[] => [
        { type: "RUN_STARTED", payload: {} },
        planning,
        { type: "CLARIFICATION_REQUESTED", payload: { clarificationId, stage: "planning", question: "Which port?" } },
        { type: "CLARIFICATION_ANSWERED", payload: { clarificationId, by: userId } },
        { type: "RUN_COMPLETED", payload: {} },
      ],
      true,
    );
    // The completed run is merged into main and its branch deleted: its records now live only on the base branch.
    expect((await squashMerge({ repoPath: repo, branch: completed.branch, baseBranch: "main", runId: completed.run.id, title: "merge" })).status).toBe("merged");
    await git(repo, ["branch", "-D", completed.branch]);

    const before = await snapshot();
    expect(before.runs.map((r) => r.status).sort()).toEqual(["completed", "completed", "failed"]);
    expect(before.clarifications).toHaveLength(1);
    expect(before.clarifications[0]).toMatchObject({ status: "answered", response: "8080", options: ["3000", "8080"] });

    closeDb();
    const file = getEnv().databaseUrl.slice("file:".length);
    for (const suffix of ["", "-wal", "-shm"]) await fs.rm(file + suffix, { force: true });
    const db = await getDb();
    expect(await db.select().from(workflowRuns)).toHaveLength(0);

    const result = await rebuildFromGit({ repoPath: repo });
    expect(result).toMatchObject({ runs: 3, clarifications: 1, errors: [] });
    const after = await snapshot();
    expect(after).toEqual(before);
  });
});
