import { fmt, percentile, printTable, useTempDatabase } from "./lib";

/**
 * Decisions under load: N runs waiting at their plan gate (GATEHOUSE_BENCH_DECIDING_RUNS, default 1000), 50 running,
 * 20 people approving over HTTP at once (every gate by two of them at the same moment). Prints whether any decision was
 * lost or applied twice, the approve latency (p50/p95, as the client sees it) and the server's event-loop delay while
 * the people decide. `npm run bench -- deciding`; GATEHOUSE_BENCH_DECIDING_SETUP_MINUTES caps the set-up (the table then
 * says how many runs were waiting).
 */
export async function run() {
  useTempDatabase("deciding");
  const waiting = Number(process.env.GATEHOUSE_BENCH_DECIDING_RUNS ?? 1000);
  // A cap on the set-up's time (minutes; none by default): on a loaded machine, the figures for the runs parked by then.
  const setUpMinutes = Number(process.env.GATEHOUSE_BENCH_DECIDING_SETUP_MINUTES ?? Infinity);
  process.env.MAX_CONCURRENT_RUNS_PER_USER = "60";
  process.env.GATEHOUSE_RATE_LIMIT_DECISIONS = "100000";
  const { resetEnvCache } = await import("@/lib/env");
  resetEnvCache();
  const { runDecidingLoad } = await import("../scripts/chaos/deciding");
  const r = await runDecidingLoad({
    waiting,
    running: 50,
    deciders: 20,
    takeTimeoutMs: 600_000,
    setUpBudgetMs: setUpMinutes * 60_000,
    onProgress: (parked, ms) => console.log(`${parked} runs waiting at their gate after ${fmt(ms / 1000, 1)} s`),
  });
  printTable([
    { measure: "runs waiting at the gate / running / people deciding", value: `${r.waiting} / ${r.running} / ${r.deciders}` },
    { measure: "approvals applied (200) / refused as already decided (409) / other", value: `${r.applied} / ${r.refused} / ${r.errors.length}` },
    { measure: "gates approved twice / never (lost)", value: `${r.appliedTwice} / ${r.lost}` },
    { measure: "runs whose workflow had not taken its decision", value: r.notTaken },
    { measure: "approvals sent again after a connection reset", value: r.resets },
    { measure: "set-up: waiting runs driven to their gate in (s)", value: fmt(r.setUpMs / 1000, 1) },
    { measure: "all decisions made in (s)", value: fmt(r.decideMs / 1000, 1) },
    { measure: "approve latency p50 (ms)", value: fmt(percentile(r.latencyMs, 50), 1) },
    { measure: "approve latency p95 (ms)", value: fmt(percentile(r.latencyMs, 95), 1) },
    { measure: "event-loop delay p50 / p99 / max (ms)", value: `${fmt(r.loopDelayMs.p50, 1)} / ${fmt(r.loopDelayMs.p99, 1)} / ${fmt(r.loopDelayMs.max, 1)}` },
  ]);
}
