import fs from "node:fs";
import { parseArgs } from "node:util";
import { closeDb } from "@/lib/db";
import { getEnv } from "@/lib/env";
import { checkRouting, defaultRouting } from "@/lib/ai/routing";
import { saveEvalReport } from "@/lib/evals/results";
import { loadTasks, runEval, TASKS_DIR, type EvalResult, type EvalTask, type Routing } from "./eval/run";
import { mineHistory, writeTasks } from "./eval/history";
import { importSweBench } from "./eval/swe-bench";
import { appDataDir, projectRepository } from "./eval/project";
import { mergedPullRequests, type PullRequest } from "./eval/pulls";
import { repoOctokit } from "@/lib/github/app";
import { repositoryInfo, syncRepository } from "@/lib/github/git";
import { buildReport, demoScripted, isDemoRouting, parseRouting, summaryLines, tableHeader, taskLine, type Dropped, type NamedRouting } from "./eval/report";

/**
 * `npm run eval -- [sources] [routings] [--json out.json] [--project id]` — see README "Measuring the agents".
 * Sources (default: the committed tasks in scripts/eval/tasks, or --tasks-dir):
 *   --from-history <repository path | project id> [--count N] [--since date] [--branch b] [--test-command 'cmd {tests}'] [--out dir] [--mine-only]
 *   --swe-bench file.jsonl [--repos-dir dir] [--test-command …]
 * Routings: --routing planner=…,implementer=…,validator=… (repeatable), or --model / --planner / --implementer / --validator.
 * Every task runs through the real workflow per routing; the hidden check runs sandboxed on the delivered branch.
 */
const { values } = parseArgs({
  options: {
    model: { type: "string" },
    planner: { type: "string" },
    implementer: { type: "string" },
    validator: { type: "string" },
    routing: { type: "string", multiple: true },
    task: { type: "string", multiple: true },
    "tasks-dir": { type: "string" },
    "from-history": { type: "string" },
    count: { type: "string" },
    since: { type: "string" },
    branch: { type: "string" },
    "test-command": { type: "string" },
    out: { type: "string" },
    "mine-only": { type: "boolean", default: false },
    "swe-bench": { type: "string" },
    "repos-dir": { type: "string" },
    project: { type: "string" },
    json: { type: "string" },
    "timeout-minutes": { type: "string", default: "10" },
    parallel: { type: "string", default: "1" },
  },
});

function fail(message: string): never {
  console.error(`eval: ${message}`);
  process.exit(2);
}

const base = defaultRouting();
const single: Routing = {
  planner: values.planner ?? values.model ?? base.planner,
  implementer: values.implementer ?? values.model ?? base.implementer,
  validator: values.validator ?? values.model ?? base.validator,
};
let routings: NamedRouting[];
try {
  routings = values.routing?.length
    ? values.routing.map((spec) => parseRouting(spec, single))
    : [{ ...single, name: `planner=${single.planner},implementer=${single.implementer},validator=${single.validator}` }];
} catch (error) {
  fail((error as Error).message);
}
for (const r of routings) {
  const problems = checkRouting(r);
  if (problems.length) fail(`routing ${r.name}: ${problems.map((p) => p.message).join("; ")}`);
}
const count = values.count === undefined ? undefined : Number(values.count);
if (count !== undefined && !(Number.isInteger(count) && count > 0)) fail(`--count must be a positive whole number, not ${values.count}`);

const parallel = Number(values.parallel);
if (!(Number.isInteger(parallel) && parallel > 0)) fail(`--parallel must be a positive whole number, not ${values.parallel}`);

const tasks: EvalTask[] = [];
const dropped: Dropped[] = [];
let projectId = values.project ?? null;

try {
  if (values["from-history"]) {
    const from = values["from-history"];
    let repo = from;
    let branch = values.branch;
    let pullRequests: PullRequest[] | undefined;
    if (!fs.existsSync(from)) {
      const project = await projectRepository(from);
      projectId ??= project.projectId;
      if (project.github) {
        // A GitHub project: its cache clone (fetched with the app's installation token) and its merged pull requests.
        const ref = project.github;
        const info = await repositoryInfo(ref);
        branch ??= info.defaultBranch;
        repo = (await syncRepository({ ref, baseBranch: branch })).repoPath;
        pullRequests = await mergedPullRequests({ client: repoOctokit(ref), owner: ref.owner, repo: ref.repo, base: branch, since: values.since, limit: 100 });
        console.log(`${pullRequests.length} merged pull requests into ${ref.owner}/${ref.repo} ${branch}`);
      } else repo = project.path;
    }
    console.log(`mining ${repo}${values.since ? ` since ${values.since}` : ""} for ${count ?? 10} tasks (checks run in the sandbox)`);
    const candidates = await mineHistory({
      repo,
      count,
      since: values.since,
      branch,
      pullRequests,
      testCommand: values["test-command"],
      onCandidate: (c) => console.log(`  ${c.valid ? "kept   " : "dropped"} ${c.commit.slice(0, 8)} ${c.subject.slice(0, 60)}${c.reason ? ` — ${c.reason}` : ""}`),
    });
    for (const c of candidates) {
      if (c.task) tasks.push(c.task);
      else dropped.push({ id: `h-${c.commit.slice(0, 8)}`, source: "history", commit: c.commit, reason: c.reason ?? "" });
    }
    console.log(`${tasks.length} valid tasks of ${candidates.length} candidates\n`);
  }
  if (values["swe-bench"]) {
    const imported = await importSweBench({ file: values["swe-bench"], reposDir: values["repos-dir"], testCommand: values["test-command"] });
    for (const d of imported.dropped) console.log(`  dropped ${d.id} — ${d.reason}`);
    tasks.push(...imported.tasks);
    dropped.push(...imported.dropped);
    console.log(`${imported.tasks.length} SWE-bench instances imported, ${imported.dropped.length} dropped\n`);
  }
  if (values.out) {
    writeTasks(values.out, tasks);
    console.log(`tasks written to ${values.out}`);
  }
  if (!values["from-history"] && !values["swe-bench"]) tasks.push(...loadTasks(values["tasks-dir"] ?? TASKS_DIR, values.task ?? []));
} catch (error) {
  fail((error as Error).message);
}

if (values["mine-only"]) process.exit(0);

const runs: Array<{ routing: NamedRouting; results: EvalResult[] }> = [];
console.log(`eval: ${tasks.length} tasks × ${routings.length} routing(s) · data in ${getEnv().dataDir}`);
try {
  for (const routing of routings) {
    console.log(`\n== ${routing.name}`);
    console.log(tableHeader(isDemoRouting(routing)));
    const results = await runEval({
      tasks,
      routing,
      timeoutMs: Number(values["timeout-minutes"]) * 60_000,
      concurrency: parallel,
      onResult: (r) => console.log(taskLine(r, isDemoRouting(routing) ? demoScripted(tasks.find((t) => t.id === r.task)!) : null)),
    });
    runs.push({ routing, results });
  }
  const report = buildReport({ tasks, runs, dropped });
  console.log("");
  for (const line of summaryLines(report)) console.log(line);
  if (values.json) {
    fs.writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`results written to ${values.json}`);
  }
  const dataDir = appDataDir();
  if (projectId && dataDir) console.log(`kept for project ${projectId}: ${saveEvalReport({ dataDir, projectId, report })}`);
  else if (projectId) console.log(`not kept for project ${projectId}: the app's data directory is unknown (set GATEHOUSE_EVAL_APP_DATA_DIR)`);
} catch (error) {
  console.error(`eval failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
} finally {
  closeDb();
  process.exit(process.exitCode ?? 0);
}
