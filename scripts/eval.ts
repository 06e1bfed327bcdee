import fs from "node:fs";
import { parseArgs } from "node:util";
import { closeDb } from "@/lib/db";
import { getEnv } from "@/lib/env";
import { defaultRouting } from "@/lib/ai/routing";
import { loadTasks, runEval, summarize, TASKS_DIR, type EvalResult, type Routing } from "./eval/run";

/**
 * `npm run eval -- [--model provider:model] [--planner …] [--implementer …] [--validator …] [--task id …] [--json out.json]`
 * Runs the versioned task set in scripts/eval/tasks through the real workflow and prints, per task, whether the hidden
 * check passed, the cost, the time and the interventions; then the pass rate. `npm run eval` puts its database in a
 * fresh temporary data directory unless GATEHOUSE_EVAL_DATA_DIR names one. With the demo model (the default without
 * keys) it runs offline and proves the harness; with real keys it measures the agents.
 */
const { values } = parseArgs({
  options: {
    model: { type: "string" },
    planner: { type: "string" },
    implementer: { type: "string" },
    validator: { type: "string" },
    task: { type: "string", multiple: true },
    json: { type: "string" },
    "timeout-minutes": { type: "string", default: "10" },
  },
});

const base = defaultRouting();
const routing: Routing = {
  planner: values.planner ?? values.model ?? base.planner,
  implementer: values.implementer ?? values.model ?? base.implementer,
  validator: values.validator ?? values.model ?? base.validator,
};
const tasks = loadTasks(TASKS_DIR, values.task ?? []);
const pad = (s: string, n: number) => s.padEnd(n);
console.log(`eval: ${tasks.length} tasks · planner ${routing.planner} · implementer ${routing.implementer} · validator ${routing.validator}`);
console.log(`data in ${getEnv().dataDir}\n`);
console.log(`${pad("task", 16)} ${pad("run", 10)} ${pad("solved", 7)} ${pad("cost $", 9)} ${pad("tokens", 8)} ${pad("time s", 7)} interventions`);
const line = (r: EvalResult) =>
  console.log(
    `${pad(r.task, 16)} ${pad(r.status, 10)} ${pad(r.solved ? "yes" : "no", 7)} ${pad(r.costUsd.toFixed(4), 9)} ${pad(String(r.tokens), 8)} ${pad(r.seconds.toFixed(1), 7)} ${r.interventions}`,
  );
try {
  const results = await runEval({ tasks, routing, timeoutMs: Number(values["timeout-minutes"]) * 60_000, onResult: line });
  const s = summarize(results);
  console.log(`\npass rate ${(s.passRate * 100).toFixed(0)}% (${s.solved}/${s.tasks}) · cost $${s.costUsd.toFixed(4)} · ${s.seconds.toFixed(1)} s · ${s.interventions} interventions`);
  if (values.json) {
    fs.writeFileSync(values.json, `${JSON.stringify({ at: new Date().toISOString(), routing, summary: s, results }, null, 2)}\n`);
    console.log(`results written to ${values.json}`);
  }
} finally {
  closeDb();
  process.exit(process.exitCode ?? 0);
}
