import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { and, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { getRunState, listEvents, replay } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createApiToken } from "@/lib/auth/tokens";
import { createProject } from "@/lib/projects/queries";
import { resetEnvCache } from "@/lib/env";
import { query } from "@/lib/executor/store";
import { slugify } from "@/lib/ai/demo/instructions";
import { generateAppKey, startGitHubEmulator } from "../../tests/github/emulator";
import { startModelServer } from "./model";

/*
 * `npm run chaos`: the server (scripts/chaos/server.ts) killed with SIGKILL at five points of a run, started again on
 * the same database and data directory, every run driven to its end over the HTTP API, then the store and git checked
 * for anything done twice. The points:
 *   model     the implementer's model call in flight (the scripted model server holds the reply; the kill comes then)
 *   commit    a task's git commit made, its step's result not stored (the server kills itself at the checkpoint)
 *   sandbox   a command running in the sandbox (`[run: sleep …]`, seen in /proc)
 *   wait      at the plan gate: killed right after an approval was answered (even trials), or killed while waiting
 *             and the approval sent to the server started again (odd trials)
 *   delivery  the push, the pull request's creation or its merge received by the GitHub emulator (by trial)
 * This process is the API client and the checker; it also hosts the GitHub emulator and the scripted model, and sets
 * their variables for the server (as the tests do), before the server starts.
 */

export const POINTS = ["model", "commit", "sandbox", "wait", "delivery"] as const;
export type ChaosPoint = (typeof POINTS)[number];

export type Duplicates = { commits: number; events: number; modelCalls: number; pullRequests: number };
export type PointResult = { point: ChaosPoint; trials: number; finished: number; duplicates: Duplicates; inconsistent: number; failures: string[] };

const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };
const TERMINAL = ["completed", "failed", "cancelled"];

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.com", ...args], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

function makeRepo(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-chaos-repo-"));
  git(dir, "init", "-q", "-b", "main");
  fs.writeFileSync(path.join(dir, "README.md"), "# chaos\n");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "init");
  return dir;
}

const fileBlock = (p: string, content: string) => ["```file:" + p, content, "```"].join("\n");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The sandbox point's command: long enough for every run of a batch to be in it at once. */
const SANDBOX_SLEEP_S = 30;

/** Processes whose command line contains `args` in order (from /proc, so also inside the sandbox's namespaces). */
function running(args: string[]): boolean {
  const wanted = `${args.join("\0")}\0`;
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(wanted)) return true;
    } catch {
      // gone meanwhile
    }
  }
  return false;
}

class Server {
  child: ChildProcess | null = null;
  url = "";
  output = "";
  restarts = 0;
  constructor(
    private readonly env: NodeJS.ProcessEnv,
    readonly armFile: string,
  ) {}

  async start() {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "server.ts"), "--arm", this.armFile], {
      env: this.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.output = "";
    this.url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server did not start: ${this.output}`)), 120_000);
      child.stdout!.on("data", (d: Buffer) => {
        this.output += d.toString();
        const m = /READY (\S+)/.exec(this.output);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.stderr!.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the server exited (${code ?? signal}) before it was ready: ${this.output}`));
      });
    });
    this.child = child;
  }

  exited(): Promise<void> {
    const child = this.child!;
    return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("exit", () => r()));
  }

  /** SIGKILL now (no-op if it already died), then start it again. */
  async killAndRestart() {
    this.child?.kill("SIGKILL");
    await this.exited();
    this.restarts++;
    await this.start();
  }

  /** Wait for it to kill itself (armed), then start it again. */
  async awaitSuicideAndRestart(timeoutMs: number) {
    const died = await Promise.race([this.exited().then(() => true), sleep(timeoutMs).then(() => false)]);
    if (!died) throw new Error("the armed kill point was never reached");
    this.restarts++;
    await this.start();
  }

  stop() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

export async function runChaos({
  trials = 20,
  points = [...POINTS],
  batchSize = 5,
  trialTimeoutMs = 600_000,
  log = (line: string) => console.log(line),
}: {
  trials?: number;
  /** Trials of a point run together, their kill points coinciding (one kill and restart of the server per batch). */
  batchSize?: number;
  points?: ChaosPoint[];
  trialTimeoutMs?: number;
  log?: (line: string) => void;
} = {}): Promise<PointResult[]> {
  // The GitHub emulator and the scripted model, and the server's variables for both (it reads them through lib/env.ts).
  const { privateKey, publicKey } = generateAppKey();
  const gh = await startGitHubEmulator({ appId: "4242", publicKey });
  const model = await startModelServer();
  const vars: Record<string, string> = {
    GITHUB_APP_ID: "4242",
    GITHUB_APP_PRIVATE_KEY: privateKey,
    GITHUB_APP_WEBHOOK_SECRET: "whsec-gatehouse-chaos-0123456789",
    GITHUB_API_URL: gh.url,
    OPENAI_COMPATIBLE_BASE_URL: model.baseURL,
    OPENAI_COMPATIBLE_API_KEY: "scripted-key",
    GATEHOUSE_RATE_LIMIT_RUNS: "100000",
    GATEHOUSE_RATE_LIMIT_DECISIONS: "100000",
    MAX_CONCURRENT_RUNS_PER_USER: "1000",
  };
  // Set for the server (and this process's own look-ups), and put back as they were at the end.
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  resetEnvCache();
  const owner = await ensureLocalOwner();
  const { token } = await createApiToken({ userId: owner.id, name: "chaos" });
  // A local and a GitHub project per run of a batch, so that the runs of one batch share no repository.
  const slots: Array<{ repo: string; local: string; repoName: string; github: string }> = [];
  for (let k = 0; k < Math.min(batchSize, trials); k++) {
    const repo = makeRepo();
    const local = await createProject({ name: `chaos-${k}`, ownerId: owner.id, repository: { type: "local", path: repo } });
    const repoName = `chaos-${k}`;
    gh.addRepository({ owner: "acme", name: repoName });
    const github = await createProject({ name: `chaos-gh-${k}`, ownerId: owner.id, repository: { type: "github", owner: "acme", repo: repoName } });
    slots.push({ repo, local: local.id, repoName, github: github.id });
  }

  const armFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-chaos-")), "arm.json");
  const server = new Server({ ...process.env, GATEHOUSE_TEST_KEEP_ENV: "1", LOG_LEVEL: "error" }, armFile);
  await server.start();

  async function api<T>(method: string, url: string, body?: unknown): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetch(`${server.url}${url}`, {
          method,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const json = (await res.json()) as T & { error?: { message: string } };
        if (!res.ok) throw Object.assign(new Error(`${method} ${url}: ${res.status} ${json.error?.message}`), { status: res.status });
        return json;
      } catch (error) {
        // The server is being restarted: try again on the new one (a 4xx is an answer, not an outage).
        if ((error as { status?: number }).status || attempt > 100) throw error;
        await sleep(200);
      }
    }
  }

  // Triage off: it checks the tasks' own commands in a sandbox before implementing, which none of the kill points is
  // about, and the plans here have nothing already done.
  const startRun = async (projectId: string, request: string, config: Record<string, unknown>) =>
    (await api<{ run: { id: string; branch: string } }>("POST", "/api/runs", { projectId, request, config: { triage: { enabled: false }, ...config } })).run;
  const runStatus = async (id: string) => (await api<{ run: { status: string } }>("GET", `/api/runs/${id}`)).run.status;
  const approve = (id: string) => api("POST", `/api/runs/${id}/approve`, {});

  /** Drive the run to its end over the API: approve a plan gate it reaches; the end is the run's and its workflow's. */
  async function driveToEnd(id: string): Promise<string> {
    const end = Date.now() + trialTimeoutMs;
    for (;;) {
      const status = await runStatus(id);
      if (status === "awaiting_approval") await approve(id).catch(() => {});
      if (TERMINAL.includes(status) || status === "paused") {
        const rows = await query<{ status: string }>(
          "SELECT status FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?",
          [id],
        );
        if (status === "paused" || TERMINAL.includes(rows[0]?.status ?? "")) return status;
      }
      if (Date.now() > end) return `${status} (timed out)`;
      await sleep(150);
    }
  }

  /**
   * Wait until every one of `ready` has held (polled; once is enough, unless `together`: then all at the same time),
   * or the trial's time is up: the ones that are not there.
   */
  async function until(ready: Array<() => boolean | Promise<boolean>>, together = false): Promise<number[]> {
    const end = Date.now() + trialTimeoutMs;
    const seen = new Set<number>();
    for (;;) {
      const missing: number[] = [];
      if (together) seen.clear();
      for (const [k, r] of ready.entries()) if (!seen.has(k) && (await r())) seen.add(k);
      for (const k of ready.keys()) if (!seen.has(k)) missing.push(k);
      if (missing.length === 0 || Date.now() > end) return missing;
      await sleep(50);
    }
  }

  /**
   * One batch of trials at a point: a run per trial started at once (each on a project of its own), all of them
   * brought to the point together, and the server killed once while every one of them is there (a run that did not
   * get there in time is reported: its trial does not count as that point hit). Then the server starts again.
   */
  async function batch(point: ChaosPoint, trials: number[]): Promise<Array<{ runId: string; projectRepo: string | null; repoName: string | null; missed: boolean }>> {
    fs.rmSync(armFile, { force: true });
    model.reset();
    model.onRequest = null;
    gh.state.onRequest = null;
    const title = (i: number) => `Chaos ${point} ${i}`;
    const local = (k: number) => slots[k]!.local;
    const out = (runs: Array<{ id: string }>, missing: number[], github = false) =>
      runs.map((run, k) => ({ runId: run.id, projectRepo: github ? null : slots[k]!.repo, repoName: github ? slots[k]!.repoName : null, missed: missing.includes(k) }));

    if (point === "model") {
      // The implementer makes three calls; each run's kill comes during its first, second or third, held unanswered.
      const at = new Map(trials.map((i) => [`docs/requests/${slugify(title(i))}.md`, (i % 3) + 1]));
      const held = new Set<string>();
      model.onRequest = (note, n) => {
        if (at.get(note) !== n || held.has(note)) return "answer";
        held.add(note);
        return "hold";
      };
      const runs = await Promise.all(trials.map((i, k) => startRun(local(k), title(i), { trustMode: { planning: "auto" }, modelRouting: SCRIPTED })));
      const missing = await until([...at.keys()].map((note) => () => held.has(note)));
      await server.killAndRestart();
      model.onRequest = null;
      model.reset();
      return out(runs, missing);
    }
    if (point === "commit") {
      // After each run's first or second task's commit.
      const request = (i: number) => [title(i), "", fileBlock(`src/chaos-${i}-a.txt`, `a ${i}`), fileBlock(`src/chaos-${i}-b.txt`, `b ${i}`)].join("\n");
      const runs = await Promise.all(trials.map((i, k) => startRun(local(k), request(i), { trustMode: { planning: "auto" } })));
      fs.writeFileSync(armFile, JSON.stringify({ targets: runs.map((run, k) => ({ runId: run.id, type: "TASK_COMPLETED", count: (trials[k]! % 2) + 1 })) }));
      const died = await Promise.race([server.exited().then(() => true), sleep(trialTimeoutMs).then(() => false)]);
      const missing = died ? [] : trials.map((_, k) => k); // which ones were held is the server's to know; none is claimed
      await server.killAndRestart();
      return out(runs, missing);
    }
    if (point === "sandbox") {
      // Long enough for every run of the batch to be in its command at once (a run that gets there first waits).
      const seconds = (i: number) => `${SANDBOX_SLEEP_S}.${String(1000 + i)}`;
      const request = (i: number) => [title(i), `[run: sleep ${seconds(i)}]`, "", fileBlock(`src/chaos-${i}.txt`, `c ${i}`)].join("\n");
      const runs = await Promise.all(trials.map((i, k) => startRun(local(k), request(i), { trustMode: { planning: "auto" } })));
      const missing = await until(
        trials.map((i) => () => running(["sleep", seconds(i)])),
        true,
      );
      await server.killAndRestart();
      return out(runs, missing);
    }
    if (point === "wait") {
      // At the plan gate: even trials approved just before the kill, odd ones approved on the server started again.
      const request = (i: number) => [title(i), "", fileBlock(`src/chaos-${i}.txt`, `w ${i}`)].join("\n");
      const runs = await Promise.all(trials.map((i, k) => startRun(local(k), request(i), { trustMode: { planning: "manual" } })));
      const missing = await until(runs.map((run) => async () => (await runStatus(run.id)) === "awaiting_approval"));
      await Promise.all(runs.filter((_, k) => trials[k]! % 2 === 0 && !missing.includes(k)).map((run) => approve(run.id)));
      await server.killAndRestart();
      await Promise.all(runs.filter((_, k) => trials[k]! % 2 === 1 && !missing.includes(k)).map((run) => approve(run.id)));
      return out(runs, missing);
    }
    // delivery: the push, the pull request's creation or its merge (by trial) received by the GitHub emulator, held
    // there until the server is dead; then the emulator goes on and handles it (the push lands, the PR opens, the merge
    // happens) and its answer finds no one.
    const targets = trials.map((i, k) => {
      const repo = `\\/repos\\/acme\\/${slots[k]!.repoName}`;
      return [new RegExp(`\\/acme\\/${slots[k]!.repoName}(\\.git)?\\/git-receive-pack$`), new RegExp(`^POST ${repo}\\/pulls$`), new RegExp(`^PUT ${repo}\\/pulls\\/\\d+\\/merge$`)][i % 3]!;
    });
    const hit = new Set<number>();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    gh.state.onRequest = (key) => {
      const k = targets.findIndex((t, k) => !hit.has(k) && t.test(key));
      if (k < 0) return;
      hit.add(k);
      return released;
    };
    try {
      const runs = await Promise.all(
        trials.map((i, k) => startRun(slots[k]!.github, [title(i), "", fileBlock(`src/chaos-${i}.txt`, `d ${i}`)].join("\n"), { trustMode: { planning: "auto" }, git: { autoMerge: true } })),
      );
      const missing = await until(targets.map((_, k) => () => hit.has(k)));
      gh.state.onRequest = null;
      server.child!.kill("SIGKILL");
      await server.exited();
      release();
      await server.killAndRestart();
      return out(runs, missing, true);
    } finally {
      gh.state.onRequest = null;
      release();
    }
  }

  /** What happened twice in one run: commits (same subject twice), events (a step key's events in two places), ok model calls per step, PRs per branch. */
  async function duplicatesOf(runId: string, projectRepo: string | null, repoName: string | null): Promise<Duplicates & { consistent: boolean }> {
    const events = await listEvents({ runId, limit: 100_000 });
    const blocks: string[] = [];
    for (const e of events) {
      const key = (e.payload as { stepKey?: string }).stepKey;
      if (key && blocks.at(-1) !== key) blocks.push(key);
    }
    const once = ["RUN_STARTED", "RUN_COMPLETED", "APPROVAL_GRANTED", "PR_OPENED", "PR_MERGED"];
    const repeatedTypes = once.reduce((n, type) => n + Math.max(0, events.filter((e) => e.type === type).length - 1), 0);
    const stored = await getRunState({ id: runId });
    const consistent = events.every((e, k) => e.sequence === k + 1) && isDeepStrictEqual(await replay({ runId }), stored);

    const branch = stored?.branch ?? "";
    const subjects = (dir: string, range: string) => {
      try {
        return git(dir, "log", "--format=%s", range).split("\n").filter(Boolean);
      } catch {
        return []; // no such branch (never pushed, or deleted after the merge)
      }
    };
    const twice = (list: string[]) => list.length - new Set(list).size;
    let commits = 0;
    if (projectRepo) commits = twice(subjects(projectRepo, `main..${branch}`));
    else {
      const gitDir = gh.git("acme", repoName!, "rev-parse", "--absolute-git-dir");
      commits = twice(subjects(gitDir, `main..${branch}`));
      // A squash-merge made twice is the same subject twice on main.
      commits += twice(subjects(gitDir, "main").filter((s) => s.includes(`(#`)));
    }

    const db = await getDb();
    const calls = await db.select().from(modelCalls).where(and(eq(modelCalls.workflowRunId, runId), eq(modelCalls.status, "ok")));
    const steps = calls.map((c) => (c.stepKey ?? c.id).replace(/#\d+$/, ""));
    const pulls = gh.pulls.filter((p) => p.head === branch).length;
    return {
      commits,
      events: blocks.length - new Set(blocks).size + repeatedTypes,
      modelCalls: twice(steps),
      pullRequests: Math.max(0, pulls - 1),
      consistent,
    };
  }

  const results: PointResult[] = [];
  try {
    for (const point of points) {
      const result: PointResult = { point, trials: 0, finished: 0, duplicates: { commits: 0, events: 0, modelCalls: 0, pullRequests: 0 }, inconsistent: 0, failures: [] };
      results.push(result);
      for (let first = 0; first < trials; first += batchSize) {
        const indices = Array.from({ length: Math.min(batchSize, trials - first) }, (_, k) => first + k);
        const started = Date.now();
        result.trials += indices.length;
        try {
          const runs = await batch(point, indices);
          const killedAt = Date.now();
          const statuses = await Promise.all(runs.map((r) => driveToEnd(r.runId)));
          for (const [k, r] of runs.entries()) {
            const i = indices[k]!;
            const status = statuses[k]!;
            if (status === "completed" && !r.missed) result.finished++;
            else result.failures.push(`trial ${i + 1} (${r.runId}): ${r.missed ? "the kill point was not reached; " : ""}${status}`);
            const d = await duplicatesOf(r.runId, r.projectRepo, r.repoName);
            result.duplicates.commits += d.commits;
            result.duplicates.events += d.events;
            result.duplicates.modelCalls += d.modelCalls;
            result.duplicates.pullRequests += d.pullRequests;
            if (!d.consistent) result.inconsistent++;
            log(`${point} #${i + 1}: ${r.missed ? "point missed, " : ""}${status}; twice: ${JSON.stringify({ commits: d.commits, events: d.events, modelCalls: d.modelCalls, pullRequests: d.pullRequests })}${d.consistent ? "" : "; replay differs"}`);
          }
          log(`${point} #${first + 1}-${first + indices.length}: to the kill and restart ${((killedAt - started) / 1000).toFixed(1)} s, then to the end ${((Date.now() - killedAt) / 1000).toFixed(1)} s`);
        } catch (error) {
          for (const i of indices) result.failures.push(`trial ${i + 1}: ${(error as Error).message.slice(0, 500)}`);
          log(`${point} #${first + 1}-${first + indices.length}: ${(error as Error).message.slice(0, 500)}`);
          if (!server.child || server.child.exitCode !== null || server.child.signalCode !== null) await server.start();
        }
      }
    }
  } finally {
    server.stop();
    model.onRequest = null;
    model.reset();
    await model.close();
    await gh.close();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetEnvCache();
  }
  return results;
}

