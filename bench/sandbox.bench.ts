import fs from "node:fs/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fmt, percentile, printTable, useTempDatabase } from "./lib";

/**
 * Sandboxes and Git-first storage: sandbox create + `true` + destroy (local, with and without bubblewrap), one
 * checkpoint commit, and rebuilding 100 runs from their `.autonomous/` records after the database is deleted.
 */
export async function run() {
  const dir = useTempDatabase("sandbox");
  const { resetEnvCache, getEnv } = await import("@/lib/env");
  resetEnvCache();
  const { closeDb } = await import("@/lib/db");
  const { git } = await import("@/lib/git/run");
  const { LocalSandbox } = await import("@/lib/sandbox");
  const { bwrapStatus } = await import("@/lib/sandbox/bwrap");
  const { buildRunContext, commitCheckpoint, commitRunRecords, createRunBranch, rebuildFromGit } = await import("@/lib/git");
  const { createProject } = await import("@/lib/projects/queries");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { createRun } = await import("@/lib/db/queries/runs");
  const { appendEvents, listEvents } = await import("@/lib/db/event-store");

  const repo = path.join(dir, "repo");
  await fs.mkdir(path.join(repo, "src"), { recursive: true });
  await git(repo, ["init", "-q", "-b", "main"]);
  for (let i = 0; i < 200; i++) await fs.writeFile(path.join(repo, "src", `file${i}.ts`), `export const v${i} = ${i};\n`);
  await git(repo, ["add", "-A"]);
  await git(repo, ["commit", "-q", "-m", "initial"]);

  const rows: Array<Record<string, string | number>> = [];
  const measure = async (operation: string, n: number, fn: (i: number) => Promise<void>) => {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await fn(i);
      times.push(performance.now() - t);
    }
    rows.push({ operation, n, "mean ms": fmt(times.reduce((a, b) => a + b, 0) / n), "p50 ms": fmt(percentile(times, 50)), "p95 ms": fmt(percentile(times, 95)) });
  };
  const cycle = (isolation: "none" | "bwrap") => async (i: number) => {
    const s = await LocalSandbox.create({ runId: `run_bench${isolation}${i}`, repoPath: repo, ref: "main", isolation });
    const r = await s.exec("true", []);
    if (r.exitCode !== 0) throw new Error(`true failed: ${r.stderr}`);
    await s.destroy();
  };

  await measure("local sandbox create + `true` + destroy (no bwrap, 200-file repo)", 10, cycle("none"));
  if (bwrapStatus().available) await measure("local sandbox create + `true` + destroy (bubblewrap)", 10, cycle("bwrap"));
  else rows.push({ operation: `bubblewrap: n/a (${bwrapStatus().reason})`, n: 0, "mean ms": "-", "p50 ms": "-", "p95 ms": "-" });

  const bwrapExec = bwrapStatus().available ? "bwrap" : "none";
  {
    const s = await LocalSandbox.create({ runId: "run_benchexec", repoPath: repo, ref: "main", isolation: bwrapExec });
    await measure(`exec \`true\` only (${bwrapExec === "bwrap" ? "bubblewrap" : "no bwrap"})`, 20, async () => {
      await s.exec("true", []);
    });
    await s.destroy();
  }

  {
    const { branch } = await createRunBranch({ repoPath: repo, runId: "run_benchcp", request: "checkpoints", baseBranch: "main" });
    const s = await LocalSandbox.create({ runId: "run_benchcp", repoPath: repo, ref: branch, branch, isolation: "none" });
    await measure("checkpoint commit (one changed file)", 20, async (i) => {
      await s.writeFile(`src/file${i}.ts`, `export const changed = ${i};\n`);
      await commitCheckpoint({ sandbox: s, runId: "run_benchcp", taskId: `T${i}`, title: "bench" });
    });
    await s.destroy();
  }

  // 100 finished runs, each with its records on its own branch.
  const owner = await ensureLocalOwner();
  const project = await createProject({ name: "bench", ownerId: owner.id, repository: { type: "local", path: repo } });
  const setup = performance.now();
  for (let i = 0; i < 100; i++) {
    const request = `Bench run ${i}`;
    const r = await createRun({ projectId: project.id, userId: owner.id, request, config: {} });
    await appendEvents(r.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "planning" } },
      { type: "STAGE_STARTED", payload: { stage: "implementation" } },
      { type: "TASK_COMPLETED", payload: { taskId: "T1" } },
      { type: "STAGE_STARTED", payload: { stage: "validation" } },
      { type: "VALIDATION_PASSED", payload: { attempt: 1 } },
      i % 5 === 0 ? { type: "RUN_FAILED", payload: { reason: "bench" } } : { type: "RUN_COMPLETED", payload: {} },
    ]);
    const { branch } = await createRunBranch({ repoPath: repo, runId: r.id, request, baseBranch: "main" });
    const events = await listEvents({ runId: r.id });
    await commitRunRecords({ repoPath: repo, branch, context: buildRunContext({ events, baseBranch: "main" }), validationReport: "ok", events });
  }
  const setupMs = performance.now() - setup;
  closeDb();
  const dbFile = getEnv().databaseUrl.slice("file:".length);
  for (const suffix of ["", "-wal", "-shm"]) await fs.rm(dbFile + suffix, { force: true });
  let rebuilt = 0;
  await measure("rebuild-from-git: 100 runs (800 events) into an empty database", 1, async () => {
    rebuilt = (await rebuildFromGit({ repoPath: repo })).runs;
  });
  if (rebuilt !== 100) throw new Error(`rebuild restored ${rebuilt} runs, expected 100`);
  rows.push({ operation: "(setup: record 100 runs on 100 branches)", n: 100, "mean ms": fmt(setupMs / 100), "p50 ms": "-", "p95 ms": "-" });
  printTable(rows);
  closeDb();
}
