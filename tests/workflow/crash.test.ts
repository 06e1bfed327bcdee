import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getEnv } from "@/lib/env";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import type { SessionUser } from "@/lib/auth/guard";
import { gateDecided } from "@/inngest/events";
import { appReport, exited, startAppProcess } from "./app-child";
import { expectRunConsistent, fileBlock, git, launch, newProject, processesRunning, tasksRequest, until, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

/**
 * Crash safety of the run workflow with the app and its executor in a child process (the server), killed with SIGKILL
 * at the worst moments and started again on the same database and data directory. This test process only stores
 * decisions and sends events, as the HTTP API would.
 */

const children: ChildProcess[] = [];
let current: ChildProcess | null = null;
const armFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-crash-")), "arm.json");
let user: SessionUser;

async function startApp(): Promise<ChildProcess> {
  const child = await startAppProcess(armFile);
  children.push(child);
  current = child;
  return child;
}


async function kill(child: ChildProcess) {
  child.kill("SIGKILL");
  await exited(child);
}

/** Arm the app to kill itself right after the step that writes the next event of `type` (its result unrecorded). */
function arm(type: string) {
  fs.writeFileSync(armFile, JSON.stringify({ type, since: Date.now() }));
}

beforeAll(async () => {
  const owner = await ensureLocalOwner();
  user = { id: owner.id, name: owner.name, via: "admin-token" };
  await startApp();
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/** Nothing happened twice: events, commits and model calls of finished steps. */
async function expectNothingTwice(runId: string, repo: string, branch: string, tasks: number) {
  const events = await expectRunConsistent(runId);
  // Independent tasks run in parallel sessions (limits.maxConcurrentTasks, default 3), each on its own branch, merged
  // once each; one session does them all otherwise.
  const branches = events.filter((e) => e.type === "TASK_BRANCH_CREATED").length;
  const sessions = Math.max(1, branches);
  expect(events.filter((e) => e.type === "TASK_MERGED")).toHaveLength(branches);
  const subjects = git(repo, "log", "--format=%s", `main..${branch}`).split("\n");
  const taskCommits = subjects.filter((s) => s.startsWith("Task "));
  // One per task, plus the single session's closing "… complete"; a parallel task's closing turn, with nothing new in
  // its worktree after its checkpoint, commits nothing.
  expect(taskCommits).toHaveLength(tasks + (branches ? 0 : 1));
  expect(new Set(taskCommits).size).toBe(taskCommits.length);
  const planCommits = subjects.filter((s) => s.startsWith("Plan v"));
  expect(new Set(planCommits).size).toBe(planCommits.length);
  expect(events.filter((e) => e.type === "TASK_COMPLETED")).toHaveLength(tasks);
  expect(events.filter((e) => e.type === "RUN_COMPLETED")).toHaveLength(1);
  // Every TASK_COMPLETED names a commit that is on the branch.
  const onBranch = new Set(git(repo, "log", "--format=%H", branch).split("\n"));
  for (const e of events.filter((e) => e.type === "TASK_COMPLETED")) expect(onBranch.has((e.payload as { commitSha: string }).commitSha)).toBe(true);

  const db = await getDb();
  const calls = await db.select().from(modelCalls).where(eq(modelCalls.workflowRunId, runId));
  const ok = calls.filter((c) => c.status === "ok").map((c) => c.stepKey!.replace(/#\d+$/, ""));
  expect(new Set(ok).size).toBe(ok.length);
  // The demo implementer takes two turns per task and a closing one per session; each finished turn has exactly one
  // recorded call.
  expect(calls.filter((c) => c.stage === "implementation" && c.status === "ok")).toHaveLength(2 * tasks + sessions);
  expect(calls.filter((c) => c.stage === "planning" && c.status === "ok")).toHaveLength(1);
  // Validation makes two calls, each once: the review and the independent alignment score (its own step key).
  const validation = calls.filter((c) => c.stage === "validation" && c.status === "ok").map((c) => c.stepKey!.replace(/#\d+$/, ""));
  expect(validation).toHaveLength(2);
  expect(validation.filter((k) => k.endsWith(":alignment"))).toHaveLength(1);
  return events;
}

const request = (title: string, n: number) =>
  [title, "", ...Array.from({ length: n }, (_, i) => fileBlock(`src/f${i}.txt`, `content ${i}`))].join("\n");

describe("crash: kill -9 the app (executor + workflow) and start it again", () => {
  it("right after a turn committed a task, before its result was recorded: the turn re-runs without a second commit, event or model call", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(user);
    arm("TASK_COMPLETED");
    const run = await launch(user, project.id, request("Crash after a task", 3), { trustMode: { planning: "auto" } });
    await exited(current!);
    // Killed right after a TASK_COMPLETED step: the round's other tasks (they run at once) may have completed theirs
    // in the same moment, so one to three of the first round's tasks are recorded — each exactly once (below).
    const before = (await listEvents({ runId: run.id, limit: 1000 })).filter((e) => e.type === "TASK_COMPLETED");
    expect(before.length).toBeGreaterThanOrEqual(1);
    expect(before.length).toBeLessThanOrEqual(3);
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    await expectNothingTwice(run.id, repo, run.branch!, 4);
  });

  it("inside a round's merge step, after its merges and before its result was recorded: the step re-runs without a second merge", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(user);
    arm("TASK_MERGED");
    const run = await launch(user, project.id, request("Crash at a merge", 3), { trustMode: { planning: "auto" } });
    await exited(current!);
    // The first round's first merge step (T1 and the tasks after it that had ended by then, in plan order) merged,
    // recorded its events and deleted the branches it could — then died before its result was recorded.
    const merged = (await listEvents({ runId: run.id, limit: 1000 })).filter((e) => e.type === "TASK_MERGED");
    expect(merged.length).toBeGreaterThanOrEqual(1);
    expect(merged.length).toBeLessThanOrEqual(3);
    expect(merged.map((e) => (e.payload as { taskId: string }).taskId)).toEqual(["T1", "T2", "T3"].slice(0, merged.length));
    const tip = git(repo, "rev-parse", run.branch!);
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    await expectNothingTwice(run.id, repo, run.branch!, 4);
    // The re-run merged nothing again: the merge commits made before the kill stay, once each, in plan order.
    const merges = git(repo, "log", "--merges", "--format=%H %s", run.branch!).split("\n").reverse();
    expect(merges.map((m) => m.replace(/^\S+ /, ""))).toEqual(["Merge task T1: Write src/f0.txt", "Merge task T2: Write src/f1.txt", "Merge task T3: Write src/f2.txt", expect.stringMatching(/^Merge task T4: /)]);
    git(repo, "merge-base", "--is-ancestor", tip, run.branch!);
    expect(git(repo, "branch", "--list", `${run.branch}--*`)).toBe("");
  });

  it("at a random moment of the implementation (once a task has started)", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(user);
    const run = await launch(user, project.id, request("Crash mid implementation", 4), { trustMode: { planning: "auto" } });
    await until(async () => (await listEvents({ runId: run.id, limit: 1000 })).some((e) => e.type === "TASK_STARTED"), "a task to start", 60_000).catch(
      async (error: Error) => {
        const events = (await listEvents({ runId: run.id, limit: 1000 })).map((e) => e.type).join(", ");
        throw new Error(`${error.message}; the run's events: ${events || "(none)"}; ${appReport(current)}`);
      },
    );
    await kill(current!);
    const before = await listEvents({ runId: run.id, limit: 1000 });
    expect(before.some((e) => e.type === "RUN_COMPLETED")).toBe(false);
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    const events = await expectNothingTwice(run.id, repo, run.branch!, 5);
    // The four file tasks ran in parallel sessions (one round: three lanes, the first of them running two tasks), the
    // note task after them; no sandbox is left.
    expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED").map((e) => (e.payload as { round: number }).round)).toEqual([1, 1, 1, 1, 2]);
    expect(fs.readdirSync(path.join(getEnv().dataDir, "workspaces")).filter((d) => d.startsWith(run.id))).toEqual([]);
  });

  it("while three parallel tasks each run a command: each resumes where it was, its command run to its end once, no task begun or completed twice, no commit or model call twice", { timeout: 180_000 }, async () => {
    // Three independent tasks (one round, three lanes at the default limit 3), each held in its own command until the
    // test creates its ref; each command's sleeps last a number of seconds no other command uses, so the test sees it run.
    const naps = ["0.1041", "0.1042", "0.1043"];
    const names = ["alpha", "beta", "gamma"];
    const held = (i: number) =>
      `n=0; until git rev-parse -q --verify refs/crash-test/go${i + 1} >/dev/null || test $n -ge 1200; do sleep ${naps[i]}; n=$((n+1)); done; if git rev-parse -q --verify refs/crash-test/go${i + 1} >/dev/null; then echo released; else echo gave-up; fi >> ${names[i]}.txt`;
    const tasks = ["# Held", ...names.flatMap((name, i) => [`- [ ] T${i + 1}: Write ${name}`, `  Files: ${name}.txt`, `  [run: ${held(i)}]`]), ""].join("\n");
    const { project, repo } = await newProject(user);
    const run = await launch(user, project.id, tasksRequest("Crash while three tasks run", tasks), { trustMode: { planning: "auto" } });
    await until(async () => naps.every((nap) => processesRunning(["sleep", nap]).length > 0), "the three tasks' commands to run at once", 120_000).catch(async (error: Error) => {
      const events = (await listEvents({ runId: run.id, limit: 1000 })).map((e) => e.type).join(", ");
      throw new Error(`${error.message}; the run's events: ${events || "(none)"}; ${appReport(current)}`);
    });
    await kill(current!);
    // The commands went with the app (bubblewrap dies with its parent): none is left to finish behind the new app's back.
    await until(async () => naps.every((nap) => processesRunning(["sleep", nap]).length === 0), "the killed app's commands to end", 30_000);
    const before = await listEvents({ runId: run.id, limit: 1000 });
    expect(before.filter((e) => e.type === "TASK_STARTED").map((e) => (e.payload as { taskId: string }).taskId).sort()).toEqual(["T1", "T2", "T3"]);
    expect(before.some((e) => e.type === "TASK_COMPLETED")).toBe(false);
    for (const i of [1, 2, 3]) git(repo, "update-ref", `refs/crash-test/go${i}`, "HEAD");
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval", "paused"], 120_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    const events = await expectRunConsistent(run.id);
    const byTask = (type: string) => events.filter((e) => e.type === type).map((e) => (e.payload as { taskId: string }).taskId);
    // Each task begun, started, completed and merged once: the kill's round resumed, no task ran again from its start.
    expect(byTask("TASK_BRANCH_CREATED").sort()).toEqual(["T1", "T2", "T3"]);
    expect(events.filter((e) => e.type === "TASK_BRANCH_CREATED").every((e) => (e.payload as { round: number; run: number }).round === 1 && (e.payload as { run: number }).run === 1)).toBe(true);
    expect(byTask("TASK_STARTED").sort()).toEqual(["T1", "T2", "T3"]);
    expect(byTask("TASK_COMPLETED").sort()).toEqual(["T1", "T2", "T3"]);
    expect(byTask("TASK_MERGED")).toEqual(["T1", "T2", "T3"]);
    // Each task's work once on the branch: its file, and its command's one line (the killed run of it wrote nothing).
    for (const [i, name] of names.entries()) expect(git(repo, "show", `${run.branch}:${name}.txt`)).toBe(`T${i + 1}: Write ${name}\nreleased`);
    // No commit twice: one per task, each once (a task's closing turn, with nothing new after its checkpoint, commits
    // nothing); every TASK_COMPLETED's commit is on the branch.
    const subjects = git(repo, "log", "--format=%s", `main..${run.branch}`).split("\n");
    const taskCommits = subjects.filter((s) => s.startsWith("Task "));
    expect(taskCommits).toHaveLength(3);
    expect(new Set(taskCommits).size).toBe(taskCommits.length);
    const onBranch = new Set(git(repo, "log", "--format=%H", run.branch!).split("\n"));
    for (const e of events.filter((e) => e.type === "TASK_COMPLETED")) expect(onBranch.has((e.payload as { commitSha: string }).commitSha)).toBe(true);
    // No model call recorded twice: one per turn's step, and each task's session has its own.
    const db = await getDb();
    const calls = (await db.select().from(modelCalls).where(eq(modelCalls.workflowRunId, run.id))).filter((c) => c.status === "ok");
    const keys = calls.map((c) => c.stepKey!.replace(/#\d+$/, ""));
    expect(new Set(keys).size).toBe(keys.length);
    for (const id of ["T1", "T2", "T3"]) expect(keys.filter((k) => k.endsWith(`/impl:1:task:${id}:1:turn:0`))).toHaveLength(1);
    expect(fs.readdirSync(path.join(getEnv().dataDir, "workspaces")).filter((d) => d.startsWith(run.id))).toEqual([]);
  });

  it("during a wait: approved while no server runs, the new server picks the decision up and completes", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(user);
    const run = await launch(user, project.id, request("Crash while waiting", 2), { trustMode: { planning: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"], 60_000);
    const gate = await waitForPendingGate(run.id);
    await kill(current!);
    await approveGate({ user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    await startApp();
    expect((await waitForStatus(run.id, ["completed", "failed"], 60_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    await expectNothingTwice(run.id, repo, run.branch!, 3);
    expect((await listEvents({ runId: run.id, limit: 1000 })).filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
  });

  it("right after the run completed, before the executor recorded it: the final step re-runs and the function still completes", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(user);
    arm("RUN_COMPLETED");
    const run = await launch(user, project.id, request("Crash at the end", 1), { trustMode: { planning: "auto" } });
    await exited(current!);
    await startApp();
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    expect((await waitForStatus(run.id, ["completed"])).status).toBe("completed");
    await expectNothingTwice(run.id, repo, run.branch!, 2);
  });

  it("right after a task's re-plan proposal was recorded, with another task proposing too: one plan gate, joined by the other, and the plan changes once", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(user);
    // Each task's own check needs the other's file: both fail, and the debug step blames the plan in both tasks.
    const tasks = ["# Both", "- [ ] T1: Write alpha", "  Files: alpha.txt", "  Check: test -f beta.txt", "- [ ] T2: Write beta", "  Files: beta.txt", "  Check: test -f alpha.txt"];
    arm("REPLAN_PROPOSED");
    const run = await launch(user, project.id, ["Both re-plan [debug: plan]", "", "```tasks.md", ...tasks, "```"].join("\n"), {
      trustMode: { planning: "auto", fixes: "manual" },
      limits: { maxConcurrentTasks: 3, maxReplans: 1 },
    });
    await exited(current!);
    // Killed right after the claim that leads the re-plan was written, before the step's result was recorded.
    const claimed = (await listEvents({ runId: run.id, limit: 1000 })).filter((e) => e.type === "REPLAN_PROPOSED");
    expect(claimed.map((e) => (e.payload as { outcome: string }).outcome)).toEqual(["planning"]);
    await startApp();
    await waitForStatus(run.id, ["awaiting_approval", "awaiting_fix_decision", "completed", "failed"], 60_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    await until(async () => (await listEvents({ runId: run.id, limit: 1000 })).filter((e) => e.type === "REPLAN_PROPOSED").length === 2, "the other task's proposal to join the gate", 60_000);
    const plan = (gate.context as { plan: { mermaid: string; tasks: Array<Record<string, unknown>> } }).plan;
    const edited = plan.tasks.map(({ checks: _checks, ...t }) => t) as never;
    await approveGate({ user, runId: run.id, input: { gateId: gate.id, editedPlan: { mermaid: plan.mermaid, tasks: edited } } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 90_000)).status).toBe("completed");
    expect(await waitForWorkflow(run.id, 60_000)).toBe("completed");
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "REPLAN_PROPOSED").map((e) => (e.payload as { outcome: string }).outcome)).toEqual(["planning", "joined"]);
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind)).toEqual(["plan"]);
    expect(events.filter((e) => e.type === "PLAN_CREATED").map((e) => (e.payload as { version: number }).version)).toEqual([1, 2]);
    expect(events.filter((e) => e.type === "TASK_MERGED").map((e) => (e.payload as { taskId: string }).taskId).sort()).toEqual(["T1", "T2"]);
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha");
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta");
  });
});
