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
import { generateAppKey, startGitHubEmulator, type GitHubEmulator } from "../../tests/github/emulator";
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
  trialTimeoutMs = 180_000,
  log = (line: string) => console.log(line),
}: {
  trials?: number;
  points?: ChaosPoint[];
  trialTimeoutMs?: number;
  log?: (line: string) => void;
} = {}): Promise<PointResult[]> {
  // The GitHub emulator and the scripted model, and the server's variables for both (it reads them through lib/env.ts).
  const { privateKey, publicKey } = generateAppKey();
  const gh = await startGitHubEmulator({ appId: "4242", publicKey });
  let notePath = "docs/requests/note.md";
  const model = await startModelServer(() => notePath);
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
  const repo = makeRepo();
  const local = await createProject({ name: "chaos", ownerId: owner.id, repository: { type: "local", path: repo } });
  gh.addRepository({ owner: "acme", name: "chaos" });
  const github = await createProject({ name: "chaos-gh", ownerId: owner.id, repository: { type: "github", owner: "acme", repo: "chaos" } });

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

  const startRun = async (projectId: string, request: string, config: Record<string, unknown>) =>
    (await api<{ run: { id: string; branch: string } }>("POST", "/api/runs", { projectId, request, config })).run;
  const runStatus = async (id: string) => (await api<{ run: { status: string } }>("GET", `/api/runs/${id}`)).run.status;
  const approve = (id: string) => api("POST", `/api/runs/${id}/approve`, {});

  async function untilStatus(id: string, statuses: string[], timeoutMs: number) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const status = await runStatus(id);
      if (statuses.includes(status)) return status;
      if (Date.now() > end) throw new Error(`run ${id} is ${status}, not ${statuses.join("|")}`);
      await sleep(100);
    }
  }

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

  /** One trial: start a run, kill the server at the point, start it again, drive the run to its end. */
  async function trial(point: ChaosPoint, i: number): Promise<{ runId: string; projectRepo: string | null }> {
    fs.rmSync(armFile, { force: true });
    model.reset();
    model.onRequest = null;
    gh.state.onRequest = null;
    const title = `Chaos ${point} ${i}`;
    if (point === "model") {
      notePath = `docs/requests/${slugify(title)}.md`;
      // The implementer makes three calls; the kill comes during the first, second or third.
      const at = (i % 3) + 1;
      let killed = false;
      const dead = new Promise<void>((resolve) => {
        model.onRequest = (n) => {
          if (n !== at || killed) return "answer";
          killed = true;
          server.child!.kill("SIGKILL");
          resolve();
          return "hold";
        };
      });
      const run = await startRun(local.id, title, { trustMode: { planning: "auto" }, modelRouting: SCRIPTED });
      await Promise.race([dead, sleep(trialTimeoutMs).then(() => Promise.reject(new Error("no model call was made")))]);
      await server.killAndRestart();
      model.reset();
      model.onRequest = null;
      return { runId: run.id, projectRepo: repo };
    }
    if (point === "commit") {
      const request = [title, "", fileBlock(`src/chaos-${i}-a.txt`, `a ${i}`), fileBlock(`src/chaos-${i}-b.txt`, `b ${i}`)].join("\n");
      const run = await startRun(local.id, request, { trustMode: { planning: "auto" } });
      // After the first or second task's commit.
      fs.writeFileSync(armFile, JSON.stringify({ runId: run.id, type: "TASK_COMPLETED", count: (i % 2) + 1 }));
      await server.awaitSuicideAndRestart(trialTimeoutMs);
      return { runId: run.id, projectRepo: repo };
    }
    if (point === "sandbox") {
      const seconds = `2.${String(1000 + i)}`;
      const request = [title, `[run: sleep ${seconds}]`, "", fileBlock(`src/chaos-${i}.txt`, `c ${i}`)].join("\n");
      const run = await startRun(local.id, request, { trustMode: { planning: "auto" } });
      const end = Date.now() + trialTimeoutMs;
      while (!running(["sleep", seconds])) {
        if (Date.now() > end) throw new Error("the sandbox command never ran");
        await sleep(20);
      }
      await server.killAndRestart();
      return { runId: run.id, projectRepo: repo };
    }
    if (point === "wait") {
      const run = await startRun(local.id, [title, "", fileBlock(`src/chaos-${i}.txt`, `w ${i}`)].join("\n"), { trustMode: { planning: "manual" } });
      await untilStatus(run.id, ["awaiting_approval"], trialTimeoutMs);
      if (i % 2 === 0) {
        await approve(run.id);
        await server.killAndRestart();
      } else {
        await server.killAndRestart();
        await approve(run.id);
      }
      return { runId: run.id, projectRepo: repo };
    }
    // delivery
    const target = [/git-receive-pack$/, /^POST \/repos\/acme\/chaos\/pulls$/, /^PUT \/repos\/acme\/chaos\/pulls\/\d+\/merge$/][i % 3]!;
    let armed = true;
    const dead = new Promise<void>((resolve) => {
      gh.state.onRequest = (key) => {
        if (!armed || !target.test(key)) return;
        armed = false;
        // The emulator goes on and handles it (the push lands, the PR opens, the merge happens); its answer finds no one.
        server.child!.kill("SIGKILL");
        resolve();
      };
    });
    const run = await startRun(github.id, [title, "", fileBlock(`src/chaos-${i}.txt`, `d ${i}`)].join("\n"), {
      trustMode: { planning: "auto" },
      git: { autoMerge: true },
    });
    await Promise.race([dead, sleep(trialTimeoutMs).then(() => Promise.reject(new Error(`no request matched ${target}`)))]);
    gh.state.onRequest = null;
    await server.killAndRestart();
    return { runId: run.id, projectRepo: null };
  }

  /** What happened twice in one run: commits (same subject twice), events (a step key's events in two places), ok model calls per step, PRs per branch. */
  async function duplicatesOf(runId: string, projectRepo: string | null): Promise<Duplicates & { consistent: boolean }> {
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
      commits = twice(subjects(gitDirOf(gh), `main..${branch}`));
      // A squash-merge made twice is the same subject twice on main.
      commits += twice(subjects(gitDirOf(gh), "main").filter((s) => s.includes(`(#`)));
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
      for (let i = 0; i < trials; i++) {
        const started = Date.now();
        result.trials++;
        try {
          const { runId, projectRepo } = await trial(point, i);
          const status = await driveToEnd(runId);
          if (status === "completed") result.finished++;
          else result.failures.push(`${runId}: ${status}`);
          const d = await duplicatesOf(runId, projectRepo);
          result.duplicates.commits += d.commits;
          result.duplicates.events += d.events;
          result.duplicates.modelCalls += d.modelCalls;
          result.duplicates.pullRequests += d.pullRequests;
          if (!d.consistent) result.inconsistent++;
          log(`${point} #${i + 1}: ${status} in ${((Date.now() - started) / 1000).toFixed(1)} s; twice: ${JSON.stringify({ commits: d.commits, events: d.events, modelCalls: d.modelCalls, pullRequests: d.pullRequests })}${d.consistent ? "" : "; replay differs"}`);
        } catch (error) {
          result.failures.push(`trial ${i + 1}: ${(error as Error).message.slice(0, 500)}`);
          log(`${point} #${i + 1}: ${(error as Error).message.slice(0, 500)}`);
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

function gitDirOf(gh: GitHubEmulator): string {
  return gh.git("acme", "chaos", "rev-parse", "--absolute-git-dir");
}
