import fs from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { getClient } from "@/lib/db";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvent, listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createProject } from "@/lib/projects/queries";
import { loadRun } from "@/lib/runs/steps/context";
import { triage } from "@/lib/runs/steps/triage";
import type { PlanDocument } from "@/lib/workflow";
import { git, makeRepo } from "./harness";

/*
 * Triage is the step between an approved plan and the implementation stage (issue 33: "Approve clicked → the
 * implementation step started"). The workflow hands it the run as its `load` step read it, on the branch its `branch`
 * step made: the run and its project (fixed at creation) are not read again on the way; the one read left is whether
 * implementation already started.
 */

let userId: string;
beforeAll(async () => {
  userId = (await ensureLocalOwner()).id;
});

const plan = (tasks: PlanDocument["tasks"]): PlanDocument => ({ summary: "s", mermaid: "flowchart TD\n  A --> B", tasks, acceptanceCriteria: [] });

/** The SQL the client's pool runs while `fn` runs. */
async function clientReadsOf<T>(fn: () => Promise<T>): Promise<{ value: T; reads: string[] }> {
  const client = await getClient();
  const { execute } = client;
  const reads: string[] = [];
  client.execute = ((stmt: string | { sql: string }, ...rest: unknown[]) => {
    reads.push(typeof stmt === "string" ? stmt : stmt.sql);
    return (execute as (...a: unknown[]) => ReturnType<typeof execute>).call(client, stmt, ...rest);
  }) as typeof execute;
  try {
    return { value: await fn(), reads };
  } finally {
    client.execute = execute;
  }
}

describe("triage with the run handed in", () => {
  it("reads neither the run nor its project, and decides as with them read", async () => {
    const repo = makeRepo();
    fs.writeFileSync(path.join(repo, "greet.txt"), "hello\n");
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "files");
    const project = await createProject({ name: `triage-reads-${Date.now()}`, ownerId: userId, repository: { type: "local", path: repo } });
    // Threshold 0.3: a task whose files are all present (and no check) is skipped, so presence decides something.
    const runs = await Promise.all([0, 1].map(() => createRun({ projectId: project.id, userId, request: "Triage reads", config: { triage: { threshold: 0.3 } } })));
    const tasks = plan([
      { id: "T1", title: "present", files: ["greet.txt"] },
      { id: "T2", title: "missing", files: ["greet.txt", "gone.txt"] },
    ]);
    const outcomes = [];
    for (const [i, r] of runs.entries()) {
      await appendEvent(r.id, { type: "RUN_STARTED", payload: {} });
      const run = await loadRun({ runId: r.id });
      git(repo, "branch", run.branch, "main");
      // The first as the workflow calls it (the run handed in), the second as before (read by triage).
      const { value, reads } = await clientReadsOf(() => triage({ runId: r.id, plan: tasks, ...(i === 0 ? { run } : {}) }));
      if (i === 0) {
        expect(reads).toHaveLength(1);
        expect(reads[0]).toMatch(/from "workflow_events"/);
      } else expect(reads.length).toBeGreaterThan(1);
      const verdicts = (await listEvents({ runId: r.id, limit: 100 })).filter((e) => e.type === "TASK_TRIAGED").map((e) => e.payload);
      outcomes.push({ skip: value.skip, verdicts: verdicts.map(({ taskId, confidence, evidence, skipped }) => ({ taskId, confidence, evidence, skipped })) });
    }
    expect(outcomes[0]!.skip.map((s) => s.id)).toEqual(["T1"]);
    expect(outcomes[0]).toEqual(outcomes[1]);
  });
});
