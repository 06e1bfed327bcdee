import { Middleware } from "inngest";
import { log, withLogContext } from "@/lib/log";

/*
 * Structured logs carry the run: every function call the SDK makes (a request from Inngest or the embedded executor)
 * and every step handler runs inside withLogContext, so whatever the workflow, the agents, git or the sandbox log while
 * working on a run has `runId` (Gatehouse's run, from the event's data) and `fn` (the Inngest function) on its line,
 * across awaits. The step handler is wrapped too: with checkpointing a step may run outside the function handler's call.
 */

type Ctx = { event?: { data?: unknown }; runId?: string };

/** The fields of a function call: Gatehouse's run id when the event names one, and the function. */
export function runLogFields({ ctx, fnId }: { ctx: Ctx; fnId: string }): { runId?: string; fn: string } {
  const data = ctx.event?.data;
  const runId = data && typeof data === "object" && typeof (data as { runId?: unknown }).runId === "string" ? (data as { runId: string }).runId : undefined;
  return runId ? { runId, fn: fnId } : { fn: fnId };
}

export class LogContextMiddleware extends Middleware.BaseMiddleware {
  readonly id = "gatehouse-log-context";

  override wrapFunctionHandler({ ctx, fn, next }: Middleware.WrapFunctionHandlerArgs): Promise<unknown> {
    return withLogContext(runLogFields({ ctx: ctx as Ctx, fnId: fn.id() }), () => next());
  }

  override wrapStepHandler({ ctx, fn, next }: Middleware.WrapStepHandlerArgs): Promise<unknown> {
    return withLogContext(runLogFields({ ctx: ctx as Ctx, fnId: fn.id() }), () => next());
  }
}

/** The embedded executor's log lines as JSON lines through lib/log.ts (its default writes plain console lines). */
export function executorLog(level: "info" | "warn" | "error", message: string, extra?: unknown): void {
  const detail = extra === undefined || extra === "" ? undefined : extra instanceof Error ? extra.message : extra;
  log[level](`executor: ${message}`, detail === undefined ? undefined : { detail });
}
