import type { Ctx } from "../context";
import { CliError, EXIT, type ExitCode } from "../errors";
import { eventLine, money, nextSteps, printable, stageProgress } from "../format";
import type { ApiClient } from "../client";
import type { Cost, RunDetail, RunEvent } from "../types";

const WAITING = new Set(["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"]);
/** Events after which the run may be waiting for a person. */
const MAY_WAIT = new Set(["APPROVAL_REQUESTED", "CLARIFICATION_REQUESTED", "RUN_PAUSED", "VALIDATION_FAILED"]);
const SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏";

/**
 * Follow a run's live timeline over SSE: one line per event, the stage progress, costs at every finished stage, what
 * to type when the run waits for you. Resolves with the exit code of the run's outcome (0 completed, 1 failed or
 * cancelled), or EXIT.waiting with --stop-when-waiting once the run waits for a person.
 */
export async function watch(ctx: Ctx, id: string, opts: { stopWhenWaiting?: boolean }): Promise<ExitCode> {
  const api = ctx.api();
  const runPath = `/api/runs/${encodeURIComponent(id)}`;
  const first = await api.get<RunDetail>(runPath);
  let stage = "";
  let costCalls = -1;
  let status = first.run.status;
  if (!ctx.json) ctx.say(`Watching ${id}: ${first.run.originalRequest.split("\n")[0]}`);

  // A progress line on a terminal (redrawn, never in a pipe or with --json).
  const live = !ctx.json && Boolean(ctx.io.stdout.isTTY);
  const started = Date.now();
  let frame = 0;
  const redraw = () => {
    const secs = Math.round((Date.now() - started) / 1000);
    ctx.io.stdout.write(`\r\x1b[K${SPINNER[frame++ % SPINNER.length]} ${printable(`${status}${stage ? ` ${stageProgress(stage)}` : ""}`)} · ${secs}s`);
  };
  const timer = live ? setInterval(redraw, 250) : null;
  const print = (text: string) => {
    if (live) ctx.io.stdout.write("\r\x1b[K");
    ctx.say(text);
    if (live) redraw();
  };

  let announcedAt = -1;
  const controller = new AbortController();
  let stopped: ExitCode | null = null;
  try {
    const end = (await api.stream({
      path: `${runPath}/stream`,
      signal: controller.signal,
      onEvent: async ({ event, data }) => {
        if (event !== "run-event") return;
        const e = data as RunEvent;
        if (ctx.json) ctx.line({ event: e });
        else {
          const line = eventLine(e);
          if (line) print(line);
        }
        // Costs at stage boundaries (not every stage reports its end, so a new stage's start counts too).
        if ((e.type === "STAGE_COMPLETED" || (e.type === "STAGE_STARTED" && stage)) && !ctx.json) {
          const cost = await costUntil(api, runPath, e.timestamp);
          if (cost.calls !== costCalls) print(`               cost so far: ${money(cost)}`);
          costCalls = cost.calls;
        }
        if (e.type === "STAGE_STARTED") stage = String(e.payload.stage ?? stage);
        // Check the run's state after an event that may start a wait, and after every event once the log has caught up
        // with where the run stood when watch started (so a wait announced by any event is seen).
        if (!MAY_WAIT.has(e.type) && e.sequence < first.run.lastSequence) return;
        const { run } = await api.get<RunDetail>(runPath);
        status = run.status;
        // Only the latest state counts: an old gate replayed from the log is not a wait any more.
        if (!WAITING.has(run.status) || run.lastSequence > e.sequence || announcedAt === run.lastSequence) return;
        announcedAt = run.lastSequence;
        const next = nextSteps(run);
        if (ctx.json) ctx.line({ waiting: { status: run.status, pendingGate: run.pendingGate, pendingClarification: run.pendingClarification } });
        else if (next) print(`⏸ ${next}`);
        if (opts.stopWhenWaiting) {
          stopped = EXIT.waiting;
          controller.abort();
        }
      },
    })) as { status?: string; reason?: string } | null;
    if (stopped !== null) return stopped;
    if (end?.reason === "not_found") throw new CliError(EXIT.notFound, `Run ${id} no longer exists.`);
    const final = await api.get<RunDetail>(runPath);
    const outcome = end?.status ?? final.run.status;
    if (ctx.json) ctx.line({ end: { status: outcome, cost: final.cost } });
    else print(`${id} ${outcome} · ${money(final.cost)}${final.run.branch ? ` · branch ${final.run.branch}` : ""}`);
    return outcome === "completed" ? EXIT.ok : EXIT.runFailed;
  } catch (error) {
    if (stopped !== null && controller.signal.aborted) return stopped;
    throw error;
  } finally {
    if (timer) {
      clearInterval(timer);
      ctx.io.stdout.write("\r\x1b[K");
    }
  }
}

type ModelCall = { costUsd: number | null; tokensIn: number | null; tokensOut: number | null; createdAt: string };

/** The run's model cost up to an event's time, so a replayed timeline shows what each stage had cost then. */
async function costUntil(api: ApiClient, runPath: string, timestamp: string): Promise<Cost> {
  const { modelCalls } = await api.get<{ modelCalls: ModelCall[] }>(`${runPath}/model-calls`);
  const until = Date.parse(timestamp);
  const upTo = modelCalls.filter((c) => Date.parse(c.createdAt) <= until);
  return {
    usd: upTo.reduce((sum, c) => sum + (c.costUsd ?? 0), 0),
    tokensIn: upTo.reduce((sum, c) => sum + (c.tokensIn ?? 0), 0),
    tokensOut: upTo.reduce((sum, c) => sum + (c.tokensOut ?? 0), 0),
    calls: upTo.length,
  };
}
