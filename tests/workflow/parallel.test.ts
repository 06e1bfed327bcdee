import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { and, eq, inArray } from "drizzle-orm";
import { getEnv } from "@/lib/env";
import { getDb } from "@/lib/db";
import { workflowRuns } from "@/lib/db/schema";
import { expectRunConsistent, fileBlock, git, launch, newProject, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

const h = useWorkflowHarness();

const ACTIVE = ["running", "awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"];

describe("parallel runs", () => {
  it("20 runs on one project at once: own branches and sandboxes, at most 5 active (MAX_CONCURRENT_RUNS_PER_USER), all complete", { timeout: 900_000 }, async () => {
    // Generous bounds (about 110 s on a quiet 2-core machine): the test proves isolation and the limit, not speed.
    expect(getEnv().MAX_CONCURRENT_RUNS_PER_USER).toBe(5);
    const { project, repo } = await newProject(h.user);
    const db = await getDb();
    const workspaces = path.join(getEnv().dataDir, "workspaces");

    // Sample while they run: active runs of the user, and which workspaces exist.
    let sampling = true;
    let maxActive = 0;
    let sawQueued = 0;
    const seenWorkspaces = new Set<string>();
    const sampler = (async () => {
      while (sampling) {
        const rows = await db
          .select({ id: workflowRuns.id, status: workflowRuns.status })
          .from(workflowRuns)
          .where(and(eq(workflowRuns.userId, h.user.id), inArray(workflowRuns.status, [...ACTIVE, "queued"])));
        maxActive = Math.max(maxActive, rows.filter((r) => ACTIVE.includes(r.status)).length);
        sawQueued = Math.max(sawQueued, rows.filter((r) => r.status === "queued").length);
        for (const entry of fs.existsSync(workspaces) ? fs.readdirSync(workspaces) : []) seenWorkspaces.add(entry);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    const runs = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        launch(h.user, project.id, `Parallel ${i}\n\n${fileBlock(`src/p${i}.txt`, `file ${i}`)}`, { trustMode: { planning: "auto" } }),
      ),
    );
    const finished = [];
    for (const run of runs) finished.push(await waitForStatus(run.id, ["completed", "failed", "cancelled"], 600_000));
    for (const run of runs) await waitForWorkflow(run.id, 60_000);
    sampling = false;
    await sampler;

    expect(finished.map((r) => r.status)).toEqual(Array(20).fill("completed"));
    expect(maxActive).toBeLessThanOrEqual(5);
    expect(sawQueued).toBeGreaterThan(0);

    // Each run on its own branch with only its own file; each sandbox was its own worktree, and none is left.
    expect(new Set(runs.map((r) => r.branch)).size).toBe(20);
    for (const [i, run] of runs.entries()) {
      const files = git(repo, "diff", "--name-only", `main...${run.branch}`, "--", "src").split("\n");
      expect(files).toEqual([`src/p${i}.txt`]);
      expect(git(repo, "show", `${run.branch}:src/p${i}.txt`)).toBe(`file ${i}`);
    }
    const runIds = new Set(runs.map((r) => r.id));
    for (const entry of seenWorkspaces) expect(runIds.has(entry.replace(/\.home$/, ""))).toBe(true);
    expect(fs.readdirSync(workspaces)).toEqual([]);

    // From the events: never more than 5 runs between RUN_STARTED and their end, and later runs started only as
    // earlier ones finished.
    const spans: Array<{ start: number; end: number }> = [];
    for (const run of runs) {
      const events = await expectRunConsistent(run.id);
      const start = events.find((e) => e.type === "RUN_STARTED")!.timestamp;
      const end = events.find((e) => e.type === "RUN_COMPLETED")!.timestamp;
      spans.push({ start: +start, end: +end });
    }
    const edges = spans.flatMap((s) => [
      { t: s.start, d: 1 },
      { t: s.end, d: -1 },
    ]);
    edges.sort((a, b) => a.t - b.t || a.d - b.d);
    let active = 0;
    let peak = 0;
    for (const e of edges) peak = Math.max(peak, (active += e.d));
    expect(peak).toBeLessThanOrEqual(5);
    const firstEnd = Math.min(...spans.map((s) => s.end));
    expect(spans.filter((s) => s.start >= firstEnd).length).toBeGreaterThanOrEqual(15);
  });
});
