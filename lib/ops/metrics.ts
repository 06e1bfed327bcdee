import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { getClient } from "@/lib/db";
import { RUN_STATUSES } from "@/lib/workflow";

/*
 * GET /api/metrics in Prometheus' text format, through prom-client. The figures are read from the database at scrape
 * time, so every app process answers the same numbers (they share one database) and nothing is lost on a restart:
 * - runs by status; pending gates by kind and the oldest one's wait; the wait of decided gates;
 * - model calls, tokens and cost by model and stage, and call latency by stage;
 * - the executor's step-to-step time (the gap between a run's consecutive recorded steps: step latency plus scheduling);
 * - this process's own Node metrics (memory, event-loop lag, GC), from prom-client's defaults.
 */

const globalForMetrics = globalThis as unknown as { __gatehouseProcessMetrics?: Registry };

function processRegistry(): Registry {
  if (!globalForMetrics.__gatehouseProcessMetrics) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    globalForMetrics.__gatehouseProcessMetrics = registry;
  }
  return globalForMetrics.__gatehouseProcessMetrics;
}

/** At most this many recent rows feed each histogram, so a scrape stays cheap on a large database. */
const RECENT = 10_000;

export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  const client = await getClient();
  const registry = new Registry();
  const rows = async (sql: string, args: Array<string | number> = []) => (await client.execute({ sql, args })).rows;

  const runs = new Gauge({ name: "gatehouse_runs", help: "Runs by status.", labelNames: ["status"], registers: [registry] });
  for (const status of RUN_STATUSES) runs.set({ status }, 0);
  for (const r of await rows("SELECT status, count(*) AS n FROM workflow_runs GROUP BY status")) runs.set({ status: String(r.status) }, Number(r.n));

  const now = Date.now();
  const pending = new Gauge({ name: "gatehouse_gates_pending", help: "Gates waiting for a person, by kind.", labelNames: ["kind"], registers: [registry] });
  const oldest = new Gauge({
    name: "gatehouse_gate_oldest_pending_seconds",
    help: "How long the oldest pending gate of each kind has waited.",
    labelNames: ["kind"],
    registers: [registry],
  });
  for (const r of await rows("SELECT kind, count(*) AS n, min(created_at) AS since FROM gates WHERE status = 'pending' GROUP BY kind")) {
    pending.set({ kind: String(r.kind) }, Number(r.n));
    oldest.set({ kind: String(r.kind) }, Math.max(0, (now - Number(r.since)) / 1000));
  }
  const waits = new Histogram({
    name: "gatehouse_gate_wait_seconds",
    help: `Time from a gate opening to its decision (the ${RECENT} most recent decisions).`,
    labelNames: ["kind"],
    buckets: [60, 300, 900, 3_600, 4 * 3_600, 86_400, 3 * 86_400, 7 * 86_400],
    registers: [registry],
  });
  for (const r of await rows("SELECT kind, decided_at - created_at AS ms FROM gates WHERE decided_at IS NOT NULL ORDER BY decided_at DESC LIMIT ?", [RECENT])) {
    waits.observe({ kind: String(r.kind) }, Math.max(0, Number(r.ms)) / 1000);
  }

  const calls = new Counter({ name: "gatehouse_model_calls_total", help: "Model calls by model, stage and status.", labelNames: ["model", "stage", "status"], registers: [registry] });
  const cost = new Counter({ name: "gatehouse_model_cost_usd_total", help: "Model cost in US dollars (from the price table).", labelNames: ["model", "stage"], registers: [registry] });
  const tokens = new Counter({ name: "gatehouse_model_tokens_total", help: "Model tokens by direction.", labelNames: ["model", "stage", "direction"], registers: [registry] });
  for (const r of await rows(
    "SELECT model, stage, status, count(*) AS n, sum(cost_usd) AS usd, sum(tokens_in) AS tin, sum(tokens_out) AS tout FROM model_calls GROUP BY model, stage, status",
  )) {
    const labels = { model: String(r.model), stage: String(r.stage) };
    calls.inc({ ...labels, status: String(r.status) }, Number(r.n));
    cost.inc(labels, Number(r.usd ?? 0));
    tokens.inc({ ...labels, direction: "in" }, Number(r.tin ?? 0));
    tokens.inc({ ...labels, direction: "out" }, Number(r.tout ?? 0));
  }
  const latency = new Histogram({
    name: "gatehouse_model_call_latency_seconds",
    help: `Model call latency by stage (the ${RECENT} most recent calls).`,
    labelNames: ["stage"],
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  });
  for (const r of await rows("SELECT stage, latency_ms FROM model_calls ORDER BY created_at DESC LIMIT ?", [RECENT])) {
    latency.observe({ stage: String(r.stage) }, Number(r.latency_ms) / 1000);
  }

  const steps = new Histogram({
    name: "gatehouse_executor_step_interval_seconds",
    help: `Time between a run's consecutive recorded steps in the embedded executor (step latency plus scheduling; the ${RECENT} most recent steps).`,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300],
    registers: [registry],
  });
  const recent = await rows(
    "SELECT run_id, created_at FROM (SELECT run_id, created_at, seq FROM executor_steps ORDER BY seq DESC LIMIT ?) ORDER BY run_id, seq",
    [RECENT],
  ).catch(() => []);
  for (let i = 1; i < recent.length; i++) {
    if (recent[i]!.run_id === recent[i - 1]!.run_id) steps.observe(Math.max(0, Number(recent[i]!.created_at) - Number(recent[i - 1]!.created_at)) / 1000);
  }

  const merged = Registry.merge([processRegistry(), registry]);
  return { contentType: merged.contentType, body: await merged.metrics() };
}
