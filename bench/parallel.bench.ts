import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fmt, printTable, useTempDatabase } from "./lib";

/**
 * Parallel tasks (limits.maxConcurrentTasks): the wall time of a full-auto run from a pasted tasks.md with six
 * independent tasks, each writing its file and running a 2-second command (`sleep 2`), at maxConcurrentTasks 1, 3 and 6,
 * on the embedded executor with the demo model and the local sandbox. `npm run bench -- parallel`.
 */
const TASKS = 6;
/**
 * `BENCH_LIMITS=1,3 npm run bench -- parallel` measures only those limits (same run, same machine load); `BENCH_TRACE=1`
 * prints each run's events with their times (where a round's time goes).
 */
const LIMITS: number[] = process.env.BENCH_LIMITS ? process.env.BENCH_LIMITS.split(",").map(Number) : [1, 3, 6];

/**
 * CPU seconds used so far by this process and its descendants (the git helper and what it ran included): user + system,
 * of the living processes and of the children they waited for. Less sensitive to the machine's load than wall time.
 */
function cpuSeconds(): number {
  const tick = 100; // USER_HZ on Linux
  const stat = (pid: string) => {
    try {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ");
      return { ppid: fields[1]!, cpu: [11, 12, 13, 14].reduce((n, i) => n + Number(fields[i]), 0) };
    } catch {
      return null;
    }
  };
  const all = new Map<string, { ppid: string; cpu: number }>();
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    const s = stat(pid);
    if (s) all.set(pid, s);
  }
  const mine = new Set([String(process.pid)]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, s] of all) {
      if (mine.has(pid) || !mine.has(s.ppid)) continue;
      mine.add(pid);
      grew = true;
    }
  }
  return [...mine].reduce((n, pid) => n + (all.get(pid)?.cpu ?? 0), 0) / tick;
}

function request(n: number): string {
  const lines = ["# Six independent tasks"];
  for (let i = 1; i <= TASKS; i++) lines.push(`- [ ] T${i}: Task ${i}`, `  Files: out/t${i}.txt`, "  [run: sleep 2]");
  return [`Parallel bench ${n}`, "", "```tasks.md", ...lines, "```"].join("\n");
}

export async function run() {
  useTempDatabase("parallel");
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { ownAppTarget } = await import("@/inngest/embedded");
  const { Executor } = await import("@/lib/executor");
  const { inngest } = await import("@/inngest");
  const { runStarted } = await import("@/inngest/events");
  const { ensureLocalOwner } = await import("@/lib/db/queries/users");
  const { createProject } = await import("@/lib/projects/queries");
  const { getRunState, listEvents } = await import("@/lib/db/event-store");
  const { startRun } = await import("@/lib/runs/service");

  const executor = new Executor({ apps: [ownAppTarget({ inProcess: true })], pollMs: 50, leaseMs: 5_000, backoff: () => 50, log: () => {} });
  await executor.start();
  const owner = await ensureLocalOwner();
  const user = { id: owner.id, name: owner.name, via: "admin-token" as const };
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-bench-parallel-"));
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=B", "-c", "user.email=b@example.com", ...args], { cwd: repo, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(repo, "README.md"), "# bench\n");
  git("add", ".");
  git("commit", "-q", "-m", "init");
  const project = await createProject({ name: "bench-parallel", ownerId: owner.id, repository: { type: "local", path: repo } });

  const once = async (n: number, maxConcurrentTasks: number) => {
    const t = performance.now();
    const cpu0 = cpuSeconds();
    const r = await startRun({ user, projectId: project.id, request: request(n), config: { trustMode: { planning: "auto" }, limits: { maxConcurrentTasks } } });
    await inngest.send(runStarted.create({ runId: r.id }));
    for (;;) {
      const status = (await getRunState({ id: r.id }))?.status;
      if (status === "completed") break;
      if (status && status !== "running" && status !== "queued") throw new Error(`bench run ${r.id} ended ${status}`);
      await new Promise((res) => setTimeout(res, 20));
    }
    const wall = performance.now() - t;
    const cpu = cpuSeconds() - cpu0;
    const events = await listEvents({ runId: r.id, limit: 10_000 });
    const at = (type: string, stage?: string) =>
      +(events.find((e) => e.type === type && (!stage || (e.payload as { stage?: string }).stage === stage))?.timestamp ?? 0);
    if (process.env.BENCH_TRACE) {
      const t0 = +events[0]!.timestamp;
      for (const e of events) {
        const p = e.payload as Record<string, unknown>;
        console.log(`${((+e.timestamp - t0) / 1000).toFixed(3).padStart(7)} ${e.type} ${[p.taskId, p.stage, p.stepKey, p.command].filter(Boolean).join(" ")}`);
      }
    }
    return { wall, cpu, implementation: at("STAGE_STARTED", "validation") - at("STAGE_STARTED", "implementation") };
  };

  await once(0, 3); // warm-up: compiles, first sandbox
  const rows: Array<{ limit: number; wall: number; cpu: number; implementation: number }> = [];
  for (const [i, limit] of LIMITS.entries()) rows.push({ limit, ...(await once(i + 1, limit)) });
  const base = rows[0]!;
  printTable(
    rows.map((r) => ({
      maxConcurrentTasks: r.limit,
      "run wall s": fmt(r.wall / 1000, 1),
      "implementation s": fmt(r.implementation / 1000, 1),
      "cpu s": fmt(r.cpu, 1),
      "speed-up (run)": fmt(base.wall / r.wall, 2),
      "speed-up (implementation)": fmt(base.implementation / r.implementation, 2),
    })),
  );
  await executor.stop();
}
