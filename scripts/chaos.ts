import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

/**
 * `npm run chaos -- [--trials N] [--batch B] [--points model,commit,sandbox,wait,delivery] [--json out.json]`
 * Kills the server (scripts/chaos/server.ts: the app's API routes and the embedded executor in one process) with
 * SIGKILL at each point N times (default 20; B runs at a time, default 5, all at the point when it is killed), starts it again, drives every run to its end over the HTTP API and
 * checks the store and git for anything done twice. Runs on a fresh data directory and database of its own.
 */
const { values } = parseArgs({
  options: {
    trials: { type: "string", default: "20" },
    batch: { type: "string", default: "5" },
    points: { type: "string", multiple: true },
    json: { type: "string" },
  },
});
const trials = Number(values.trials);
if (!Number.isInteger(trials) || trials < 1) throw new Error(`--trials must be a positive whole number (got ${values.trials})`);
const batchSize = Number(values.batch);
if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error(`--batch must be a positive whole number (got ${values.batch})`);

// A data directory and database of its own, set before anything reads the environment (as bench/lib.ts does).
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-chaos-data-"));
process.env.GATEHOUSE_DATA_DIR = dir;
process.env.DATABASE_URL = `file:${path.join(dir, "chaos.db")}`;
process.env.LOG_LEVEL = "error";

const { POINTS, runChaos } = await import("./chaos/run");
const points = (values.points ?? []).flatMap((p) => p.split(",")).filter(Boolean);
for (const p of points) if (!(POINTS as readonly string[]).includes(p)) throw new Error(`--points: unknown point ${p} (one of ${POINTS.join(", ")})`);

const started = Date.now();
const results = await runChaos({ trials, batchSize, points: points.length ? (points as typeof POINTS[number][]) : undefined });
console.table(
  results.map((r) => ({
    point: r.point,
    trials: r.trials,
    finished: r.finished,
    "dup commits": r.duplicates.commits,
    "dup events": r.duplicates.events,
    "dup model calls": r.duplicates.modelCalls,
    "dup PRs": r.duplicates.pullRequests,
    inconsistent: r.inconsistent,
  })),
);
for (const r of results) for (const f of r.failures) console.log(`${r.point}: ${f}`);
console.log(`${results.reduce((n, r) => n + r.trials, 0)} trials in ${((Date.now() - started) / 60_000).toFixed(1)} min; data in ${dir}`);
if (values.json) {
  fs.writeFileSync(values.json, JSON.stringify({ points: results.map(({ point, trials, finished, duplicates }) => ({ point, trials, finished, duplicates })) }, null, 2));
}
const clean = results.every((r) => r.finished === r.trials && r.inconsistent === 0 && Object.values(r.duplicates).every((n) => n === 0));
process.exit(clean ? 0 : 1);
