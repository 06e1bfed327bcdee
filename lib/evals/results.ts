import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { z } from "zod";

/*
 * Eval results kept per project. `npm run eval` runs on a database of its own (a temporary data directory), so its
 * results cannot go into the app's tables; instead it writes one JSON file per eval round under the app's data
 * directory, `<data dir>/evals/<project id>/`, and the app reads them from there (GET /api/projects/:id/evals, the
 * project card's "Eval results"). Files are written whole (temporary file + rename): a reader never sees half a round.
 */

const taskRow = z.object({
  id: z.string(),
  source: z.enum(["file", "history", "swe-bench"]),
  commit: z.string().nullable(),
  valid: z.boolean(),
  solved: z.boolean(),
  costUsd: z.number(),
  tokens: z.number(),
  seconds: z.number(),
  interventions: z.number(),
  /** The routing's name (null for a candidate dropped before any run). */
  routing: z.string().nullable(),
  status: z.string().optional(),
  reason: z.string().nullable().optional(),
});

const routingRow = z.object({
  name: z.string(),
  planner: z.string(),
  implementer: z.string(),
  validator: z.string(),
  tasks: z.number(),
  solved: z.number(),
  passRate: z.number(),
  costUsd: z.number(),
  tokens: z.number(),
  seconds: z.number(),
  interventions: z.number(),
});

export const evalReportSchema = z.object({
  at: z.string(),
  tasks: z.array(taskRow),
  routings: z.array(routingRow),
  /** Set when every stage of some routing ran on the demo model: what it can solve (see the README). */
  demo: z.string().nullable().optional(),
});
export type EvalReport = z.infer<typeof evalReportSchema>;
export type EvalTaskRow = z.infer<typeof taskRow>;
export type EvalRoutingRow = z.infer<typeof routingRow>;

const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;

export function evalResultsDir(dataDir: string, projectId: string): string {
  if (!SAFE_ID.test(projectId)) throw new Error(`not a project id: ${projectId}`);
  return path.join(dataDir, "evals", projectId);
}

/** Keep one eval round's report for a project; returns the file written. */
export function saveEvalReport({ dataDir, projectId, report }: { dataDir: string; projectId: string; report: EvalReport }): string {
  const parsed = evalReportSchema.parse(report);
  const dir = evalResultsDir(dataDir, projectId);
  fs.mkdirSync(dir, { recursive: true });
  const name = `${parsed.at.replace(/[^0-9A-Za-z]/g, "")}-${randomUUID().slice(0, 8)}.json`;
  const tmp = path.join(dir, `.${name}.tmp`);
  fs.writeFileSync(tmp, `${JSON.stringify(parsed, null, 2)}\n`);
  fs.renameSync(tmp, path.join(dir, name));
  return path.join(dir, name);
}

/** A project's kept eval rounds, newest first (files that do not parse are skipped). */
export function listEvalReports({ dataDir, projectId, limit = 20 }: { dataDir: string; projectId: string; limit?: number }): EvalReport[] {
  const dir = evalResultsDir(dataDir, projectId);
  let names: string[];
  try {
    names = fs.readdirSync(dir).filter((f) => f.endsWith(".json") && !f.startsWith("."));
  } catch {
    return [];
  }
  const reports: EvalReport[] = [];
  for (const name of names) {
    try {
      const parsed = evalReportSchema.safeParse(JSON.parse(fs.readFileSync(path.join(dir, name), "utf8")));
      if (parsed.success) reports.push(parsed.data);
    } catch {
      // unreadable or not JSON: not a round
    }
  }
  return reports.sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0)).slice(0, limit);
}
