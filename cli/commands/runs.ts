import fs from "node:fs";
import { RUN_STATUSES } from "../../lib/workflow/types";
import type { Ctx } from "../context";
import { CLI, CliError, EXIT } from "../errors";
import { eventLine, money, nextSteps, printable, projectsTable, runsTable } from "../format";
import type { Project, Run, RunDetail, RunEvent } from "../types";

export async function projects(ctx: Ctx) {
  const body = await ctx.api().get<{ projects: Project[] }>("/api/projects");
  ctx.result(body);
  ctx.say(projectsTable(body.projects));
}

/** A project named by id or (case-insensitive) name; without one, the only project there is. */
async function resolveProject(ctx: Ctx, wanted: string | undefined): Promise<Project> {
  const { projects: all } = await ctx.api().get<{ projects: Project[] }>("/api/projects");
  const names = all.map((p) => `${p.id} (${p.name})`).join(", ") || "none";
  if (!wanted) {
    if (all.length === 1) return all[0]!;
    throw new CliError(EXIT.usage, `Say which project with --project <id or name>; yours: ${names}.`);
  }
  const byId = all.find((p) => p.id === wanted);
  if (byId) return byId;
  const byName = all.filter((p) => p.name.toLowerCase() === wanted.toLowerCase());
  if (byName.length === 1) return byName[0]!;
  if (byName.length > 1) throw new CliError(EXIT.usage, `Several projects are named "${wanted}"; use the id: ${byName.map((p) => p.id).join(", ")}.`);
  throw new CliError(EXIT.notFound, `No project "${wanted}" among yours: ${names}.`);
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    throw new CliError(EXIT.usage, `--config: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)}).`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CliError(EXIT.usage, `--config: ${file} is not valid JSON (${(error as Error).message}).`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new CliError(EXIT.usage, `--config: ${file} must hold a JSON object such as {"trustMode": {"planning": "manual"}}.`);
  }
  return parsed as Record<string, unknown>;
}

export function parseApproaches(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 5) throw new CliError(EXIT.usage, `--approaches: "${value}" is not a whole number from 1 to 5.`);
  return n;
}

export async function run(ctx: Ctx, request: string, opts: { project?: string; config?: string; approaches?: number; watch?: boolean }) {
  if (!request.trim()) throw new CliError(EXIT.usage, `Say what to do: ${CLI} run "<request>".`);
  const config = opts.config ? readConfigFile(opts.config) : undefined;
  const project = await resolveProject(ctx, opts.project);
  const count = opts.approaches ?? 1;
  // Like the dashboard's "explore approaches": the server starts the request N times side by side, all or none, under
  // one group id (GET /api/run-groups/:id).
  const base = { projectId: project.id, request, ...(config ? { config } : {}) };
  const body = await ctx.api().post<{ run: Run; runs?: Run[]; groupId?: string }>("/api/runs", count === 1 ? base : { ...base, approaches: count });
  const runs: Run[] = body.runs ?? [body.run];
  const result = count === 1 ? { run: runs[0] } : { runs, groupId: body.groupId };
  // Followed by watch's one-object-per-line output, the result is one line too.
  if (opts.watch && ctx.json) ctx.line(result);
  else ctx.result(result);
  for (const r of runs) ctx.say(`Started ${r.id} in ${project.name} (${r.status}).`);
  if (count > 1) ctx.say(`Compare them in the dashboard: ${ctx.api().url}/compare?runs=${runs.map((r) => r.id).join(",")}`);
  ctx.say(`Follow it: ${CLI} watch ${runs[0]!.id}`);
  return runs;
}

export function parseStatuses(value: string): string {
  const wanted = value.split(",").map((s) => s.trim()).filter(Boolean);
  const bad = wanted.filter((s) => !(RUN_STATUSES as readonly string[]).includes(s));
  if (bad.length || wanted.length === 0) {
    throw new CliError(EXIT.usage, `--status: ${bad.join(", ") || "(empty)"} is not a run status; use any of: ${RUN_STATUSES.join(", ")}.`);
  }
  return wanted.join(",");
}

export async function runs(ctx: Ctx, opts: { status?: string; project?: string; limit?: number }) {
  const query = new URLSearchParams();
  if (opts.status) query.set("status", opts.status);
  if (opts.project) query.set("projectId", (await resolveProject(ctx, opts.project)).id);
  if (opts.limit) query.set("limit", String(opts.limit));
  const body = await ctx.api().get<{ runs: Run[]; nextCursor: string | null }>(`/api/runs?${query}`);
  ctx.result(body);
  ctx.say(runsTable(body.runs));
}

export async function show(ctx: Ctx, id: string) {
  const detail = await ctx.api().get<RunDetail>(`/api/runs/${encodeURIComponent(id)}`);
  ctx.result(detail);
  const { run: r } = detail;
  ctx.say(`${r.id}  ${r.status}${r.currentStage ? ` · ${r.currentStage}` : ""}`);
  ctx.say(`request: ${r.originalRequest.split("\n")[0]}`);
  if (r.branch) ctx.say(`branch:  ${r.branch}${r.merged ? " (merged)" : ""}`);
  if (r.pullRequest) ctx.say(`pull request: ${JSON.stringify(r.pullRequest)}`);
  if (r.error) ctx.say(`error:   ${r.error}`);
  ctx.say(`cost:    ${money(detail.cost)}`);
  const next = nextSteps(r);
  if (next) ctx.say(next);
}

export async function cancel(ctx: Ctx, id: string, opts: { reason?: string }) {
  const body = await ctx.api().post<{ run: Run }>(`/api/runs/${encodeURIComponent(id)}/cancel`, opts.reason ? { reason: opts.reason } : {});
  ctx.result(body);
  ctx.say(`Cancelled ${body.run.id}; its branch is kept.`);
}

export async function retry(ctx: Ctx, id: string) {
  const body = await ctx.api().post<{ run: Run }>(`/api/runs/${encodeURIComponent(id)}/retry`, {});
  ctx.result(body);
  ctx.say(`Resumed ${body.run.id} (${body.run.status}).`);
}

export async function diff(ctx: Ctx, id: string) {
  const body = await ctx.api().get<{ diff: string; base: string | null; head: string | null; truncated: boolean }>(`/api/runs/${encodeURIComponent(id)}/diff`);
  ctx.result(body);
  if (ctx.json) return;
  if (!body.diff) {
    ctx.say("No changes on the run's branch yet.");
    return;
  }
  ctx.io.stdout.write(printable(body.diff.endsWith("\n") ? body.diff : `${body.diff}\n`));
  if (body.truncated) ctx.io.stderr.write("(diff truncated by the server; see the full branch with git)\n");
}

/** Every stored event of a run, oldest first (paged). */
export async function allEvents(ctx: Ctx, id: string, after = 0): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  let cursor = after;
  for (;;) {
    const { events } = await ctx.api().get<{ events: RunEvent[] }>(`/api/runs/${encodeURIComponent(id)}/events?after=${cursor}&limit=2000`);
    out.push(...events);
    if (events.length < 2000) return out;
    cursor = events.at(-1)!.sequence;
  }
}

export async function logs(ctx: Ctx, id: string, opts: { after?: number }) {
  const events = await allEvents(ctx, id, opts.after ?? 0);
  ctx.result({ events });
  for (const e of events) {
    const line = eventLine(e);
    if (line) ctx.say(line);
  }
}
