import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { query } from "@/lib/executor/store";
import { listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import type { SessionUser } from "@/lib/auth/guard";
import { expectRunConsistent, fileBlock, git, launch, newProject, until, waitForStatus, waitForWorkflow } from "./harness";

/**
 * Several app processes on one libSQL file, each with its embedded executor (as several `npm start` replicas behind one
 * URL would run): the process driving a run is killed with SIGKILL and the other one finishes the run, with no event,
 * commit or model call done twice. The executor's leases decide who drives; this proves it for the whole app (workflow
 * side effects included), not only for the executor's own tables.
 */

/** `output`: everything the process printed (its executor's warnings and errors, a blocked event loop). */
type App = { name: string; child: ChildProcess; output: () => string };
const apps: App[] = [];
const armFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-multi-")), "arm.json");
let user: SessionUser;

async function startApp(name: string): Promise<App> {
  // Both processes are armed with the same file: whichever process wrote the awaited event kills itself right after.
  const child = spawn(process.execPath, ["--import", "tsx", path.join("tests", "workflow", "fixtures", "app-process.ts"), "--arm", armFile, "--worker-id", name], {
    env: { ...process.env, GATEHOUSE_TEST_KEEP_ENV: "1", LOG_LEVEL: "error" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start: ${output}`)), 60_000);
    child.stdout!.on("data", () => {
      if (output.includes("READY")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code, signal) => reject(new Error(`${name} exited (${code ?? signal}) before it was ready: ${output}`)));
  });
  const app = { name, child, output: () => output };
  apps.push(app);
  return app;
}

const alive = (app: App) => app.child.exitCode === null && app.child.signalCode === null;
const exited = (app: App) => (alive(app) ? new Promise<void>((r) => app.child.once("exit", () => r())) : Promise.resolve());

/** The worker holding the lease of the run's workflow function right now (null between steps). */
async function leaseOwner(runId: string): Promise<string | null> {
  const rows = await query<{ lease_owner: string | null }>(
    "SELECT lease_owner FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ? AND status = 'running'",
    [runId],
  );
  return rows[0]?.lease_owner ?? null;
}

beforeAll(async () => {
  const owner = await ensureLocalOwner();
  user = { id: owner.id, name: owner.name, via: "admin-token" };
});

afterAll(() => {
  for (const app of apps) if (alive(app)) app.child.kill("SIGKILL");
});

/** Nothing happened twice: events, commits and model calls of finished steps. */
async function expectNothingTwice(runId: string, repo: string, branch: string, tasks: number) {
  const events = await expectRunConsistent(runId);
  // Independent tasks run in parallel sessions (limits.maxConcurrentTasks, default 3), each merged once.
  const branches = events.filter((e) => e.type === "TASK_BRANCH_CREATED").length;
  const sessions = Math.max(1, branches);
  expect(events.filter((e) => e.type === "TASK_MERGED")).toHaveLength(branches);
  const subjects = git(repo, "log", "--format=%s", `main..${branch}`).split("\n");
  const taskCommits = subjects.filter((s) => s.startsWith("Task "));
  // One per task, plus the single session's closing "… complete"; a parallel task's closing turn, with nothing new in
  // its worktree after its checkpoint, commits nothing.
  expect(taskCommits).toHaveLength(tasks + (branches ? 0 : 1));
  expect(new Set(taskCommits).size).toBe(taskCommits.length);
  expect(events.filter((e) => e.type === "TASK_COMPLETED")).toHaveLength(tasks);
  expect(events.filter((e) => e.type === "RUN_COMPLETED")).toHaveLength(1);
  const db = await getDb();
  const calls = await db.select().from(modelCalls).where(eq(modelCalls.workflowRunId, runId));
  const ok = calls.filter((c) => c.status === "ok").map((c) => c.stepKey!.replace(/#\d+$/, ""));
  expect(new Set(ok).size).toBe(ok.length);
  expect(calls.filter((c) => c.stage === "implementation" && c.status === "ok")).toHaveLength(2 * tasks + sessions);
  expect(calls.filter((c) => c.stage === "planning" && c.status === "ok")).toHaveLength(1);
}

/** The run's workflow finished, or an error that carries what the surviving process printed (seen once: a 93 s stall). */
async function finishedOrExplained(runId: string, survivor: App): Promise<string> {
  try {
    return await waitForWorkflow(runId, 90_000);
  } catch (error) {
    throw new Error(`${(error as Error).message}; ${survivor.name} (alive: ${alive(survivor)}, lease owner now: ${await leaseOwner(runId)}) printed:\n${survivor.output().slice(-4000)}`);
  }
}

const request = (title: string, n: number) =>
  [title, "", ...Array.from({ length: n }, (_, i) => fileBlock(`src/f${i}.txt`, `content ${i}`))].join("\n");

describe("two app processes on one database", () => {
  it("the process that just committed a task is killed before its result is recorded; the other finishes the run", { timeout: 180_000 }, async () => {
    const pair = [await startApp("app-a"), await startApp("app-b")];
    const { project, repo } = await newProject(user);
    fs.writeFileSync(armFile, JSON.stringify({ type: "TASK_COMPLETED", since: Date.now() }));
    const run = await launch(user, project.id, request("Two processes, one dies after a task", 3), { trustMode: { planning: "auto" } });
    // Exactly one of them dies: the one that drove the step.
    await Promise.race(pair.map(exited));
    const [dead, survivor] = alive(pair[0]!) ? [pair[1]!, pair[0]!] : [pair[0]!, pair[1]!];
    expect(dead.child.signalCode).toBe("SIGKILL");
    expect(alive(survivor)).toBe(true);
    expect(await finishedOrExplained(run.id, survivor)).toBe("completed");
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    await expectNothingTwice(run.id, repo, run.branch!, 4);
    expect(alive(survivor)).toBe(true);
    survivor.child.kill("SIGKILL");
    await exited(survivor);
  });

  it("kill -9 of whichever process holds the run's lease mid implementation; the other takes over when the lease expires", { timeout: 180_000 }, async () => {
    fs.rmSync(armFile, { force: true });
    // The earlier test's surviving process would poll the same database and could take this run's lease: only this
    // test's pair may drive it.
    for (const app of apps.filter(alive)) {
      app.child.kill("SIGKILL");
      await exited(app);
    }
    const pair = [await startApp("app-c"), await startApp("app-d")];
    const { project, repo } = await newProject(user);
    const run = await launch(user, project.id, request("Two processes, the driver is killed", 4), { trustMode: { planning: "auto" } });
    await until(async () => (await listEvents({ runId: run.id, limit: 1000 })).some((e) => e.type === "TASK_STARTED"), "a task to start", 60_000);
    let owner: string | null = null;
    await until(async () => !!(owner = await leaseOwner(run.id)), "a process to hold the run's lease", 60_000);
    const driver = pair.find((a) => a.name === owner)!;
    expect(driver, `the lease is held by ${owner}`).toBeDefined();
    driver.child.kill("SIGKILL");
    await exited(driver);
    const survivor = pair.find((a) => a !== driver)!;
    expect((await listEvents({ runId: run.id, limit: 1000 })).some((e) => e.type === "RUN_COMPLETED")).toBe(false);
    expect(await finishedOrExplained(run.id, survivor)).toBe("completed");
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    await expectNothingTwice(run.id, repo, run.branch!, 5);
    expect(alive(survivor)).toBe(true);
  });
});
