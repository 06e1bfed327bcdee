import type { EvalReport, EvalRoutingRow, EvalTaskRow } from "@/lib/evals/results";
import type { EvalResult, EvalTask, Routing } from "./run";

/*
 * What an eval round reports: per routing its totals and a per-task table, the dropped candidates with their reasons,
 * and — with the demo model — which tasks it could solve at all. The same data is written by `--json` and kept for the
 * project page.
 */

export type NamedRouting = Routing & { name: string };

/** A candidate task that was not kept (mined or imported), with the reason. */
export type Dropped = { id: string; source: EvalTask["source"]; commit: string | null; reason: string };

const DEMO_MARKER = /(```|~~~)file:/;

export const isDemoRouting = (r: Routing) => [r.planner, r.implementer, r.validator].every((m) => m.startsWith("demo:"));

/** The tasks the demo model is scripted for: their request (or demoRequest) carries its `file:` blocks. */
export function demoScripted(task: EvalTask): boolean {
  return DEMO_MARKER.test(task.demoRequest ?? task.request);
}

/** Parse `planner=…,implementer=…,validator=…`; stages left out keep `base`'s model. */
export function parseRouting(spec: string, base: Routing): NamedRouting {
  const routing: Routing = { ...base };
  for (const part of spec.split(",").map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf("=");
    const stage = part.slice(0, eq).trim();
    const model = part.slice(eq + 1).trim();
    if (eq < 0 || !model) throw new Error(`--routing ${spec}: "${part}" is not stage=provider:model`);
    if (stage !== "planner" && stage !== "implementer" && stage !== "validator") {
      throw new Error(`--routing ${spec}: unknown stage "${stage}" (planner, implementer or validator)`);
    }
    routing[stage] = model;
  }
  return { ...routing, name: spec };
}

export function buildReport({
  at = new Date().toISOString(),
  tasks,
  runs,
  dropped = [],
}: {
  at?: string;
  tasks: EvalTask[];
  runs: Array<{ routing: NamedRouting; results: EvalResult[] }>;
  dropped?: Dropped[];
}): EvalReport {
  const rows: EvalTaskRow[] = [];
  const routings: EvalRoutingRow[] = [];
  for (const { routing, results } of runs) {
    for (const r of results) {
      rows.push({
        id: r.task,
        source: r.source,
        commit: r.commit,
        valid: true,
        solved: r.solved,
        costUsd: r.costUsd,
        tokens: r.tokens,
        seconds: r.seconds,
        interventions: r.interventions,
        routing: routing.name,
        status: r.status,
        reason: null,
      });
    }
    const solved = results.filter((r) => r.solved).length;
    routings.push({
      name: routing.name,
      planner: routing.planner,
      implementer: routing.implementer,
      validator: routing.validator,
      tasks: results.length,
      solved,
      passRate: results.length ? solved / results.length : 0,
      costUsd: results.reduce((s, r) => s + r.costUsd, 0),
      tokens: results.reduce((s, r) => s + r.tokens, 0),
      seconds: results.reduce((s, r) => s + r.seconds, 0),
      interventions: results.reduce((s, r) => s + r.interventions, 0),
    });
  }
  for (const c of dropped) {
    rows.push({ id: c.id, source: c.source, commit: c.commit, valid: false, solved: false, costUsd: 0, tokens: 0, seconds: 0, interventions: 0, routing: null, reason: c.reason });
  }
  const scripted = tasks.filter(demoScripted).map((t) => t.id);
  const demo = runs.some((r) => isDemoRouting(r.routing))
    ? `The demo model is scripted, not AI: it solves only tasks whose request carries its file blocks — ${scripted.length} of ${tasks.length} here${scripted.length ? ` (${scripted.join(", ")})` : ""}. Its score proves the harness, not an agent.`
    : null;
  return { at, tasks: rows, routings, demo };
}

const pad = (s: string, n: number) => s.padEnd(n);

/** The per-task line printed as results come in. */
export function taskLine(r: EvalResult, scripted: boolean | null): string {
  return `${pad(r.task.slice(0, 34), 35)} ${pad(r.source, 9)} ${pad(r.status, 10)} ${pad(r.solved ? "yes" : "no", 7)} ${pad(r.costUsd.toFixed(4), 9)} ${pad(String(r.tokens), 8)} ${pad(r.seconds.toFixed(1), 7)} ${pad(String(r.interventions), 13)}${scripted === null ? "" : scripted ? " scripted" : " -"}`;
}

export function tableHeader(demo: boolean): string {
  return `${pad("task", 35)} ${pad("source", 9)} ${pad("run", 10)} ${pad("solved", 7)} ${pad("cost $", 9)} ${pad("tokens", 8)} ${pad("time s", 7)} ${pad("interventions", 13)}${demo ? " demo" : ""}`;
}

/** The comparison printed at the end: one line per routing. */
export function summaryLines(report: EvalReport): string[] {
  const lines = [`${pad("routing", 50)} ${pad("solved", 9)} ${pad("cost $", 9)} ${pad("tokens", 9)} ${pad("time s", 8)} interventions`];
  for (const r of report.routings) {
    lines.push(`${pad(r.name.slice(0, 49), 50)} ${pad(`${r.solved}/${r.tasks}`, 9)} ${pad(r.costUsd.toFixed(4), 9)} ${pad(String(r.tokens), 9)} ${pad(r.seconds.toFixed(1), 8)} ${r.interventions}`);
  }
  if (report.demo) lines.push("", report.demo);
  return lines;
}
