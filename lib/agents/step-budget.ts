import type { DetachedStatus, ExecOptions, ExecResult, Sandbox } from "@/lib/sandbox/types";

/*
 * A durable step must fit its host's duration limit (a serverless function is cut after it). The agents share two
 * tools for that, so the planner, the implementer and the validator bound their work the same way:
 * - stepBudgetSignal: a model call still unanswered at the step's end is aborted (StepBudgetExceededError) and redone
 *   in a fresh step;
 * - execWithinStep / waitDetached: a command that could outlive the step runs detached in the sandbox, and later steps
 *   look at it (each within its budget) until it has ended, so it runs once however many steps it spans.
 */

/** The model call did not answer before its durable step's time ran out: the work is redone in a fresh step. */
export class StepBudgetExceededError extends Error {
  constructor(
    /** What the next step starts from instead of from scratch (plain JSON: it is stored as the step's result). */
    readonly resume?: unknown,
  ) {
    super("The model call was cut at the end of its step's time budget.");
    this.name = "StepBudgetExceededError";
  }
}

/** How often a step looks whether its time is up. */
const BUDGET_POLL_MS = 100;
/**
 * How often a step looks whether its detached command has ended: first after 5 ms, doubling up to 200 ms, so a quick
 * command (most acceptance checks) is collected within milliseconds while a long one costs a look every 200 ms.
 */
const DETACHED_POLL_FIRST_MS = 5;
const DETACHED_POLL_MS = 200;
/** Sandbox exec's default timeout, for a command that names none. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 120_000;

/**
 * An abort signal for the model calls of a step ending at `stepEndsAt` (epoch ms on `now`): it fires with
 * StepBudgetExceededError once the time is up while `armed()` (the implementer disarms it once a tool runs: the
 * model's answer is in by then). No `stepEndsAt`: it never fires.
 */
export function stepBudgetSignal({
  stepEndsAt,
  now = Date.now,
  armed = () => true,
}: {
  stepEndsAt?: number;
  now?: () => number;
  armed?: () => boolean;
}): { signal: AbortSignal; exceeded: () => boolean; stop: () => void } {
  const budget = new AbortController();
  const timer =
    stepEndsAt === undefined
      ? null
      : setInterval(() => {
          if (armed() && now() >= stepEndsAt) budget.abort(new StepBudgetExceededError());
        }, BUDGET_POLL_MS);
  return {
    signal: budget.signal,
    exceeded: () => budget.signal.aborted,
    stop: () => {
      if (timer) clearInterval(timer);
    },
  };
}

/**
 * Wait for a detached command until it has ended or `until` (epoch ms on `now`) has come, whichever is first: its
 * result, or `running` (a later step looks again). An abort kills it (its whole process group) and throws.
 */
export async function waitDetached({
  sandbox,
  id,
  until,
  now = Date.now,
  signal,
}: {
  sandbox: Required<Pick<Sandbox, "detachedStatus" | "killDetached">>;
  id: string;
  until: number;
  now?: () => number;
  signal?: AbortSignal;
}): Promise<DetachedStatus> {
  const kill = () => void sandbox.killDetached(id).catch(() => null);
  signal?.addEventListener("abort", kill, { once: true });
  try {
    for (let pollMs = DETACHED_POLL_FIRST_MS; ; pollMs = Math.min(pollMs * 2, DETACHED_POLL_MS)) {
      if (signal?.aborted) {
        await sandbox.killDetached(id).catch(() => null);
        throw signal.reason ?? new Error("aborted");
      }
      const status = await sandbox.detachedStatus(id);
      if (status.state === "exited") return status;
      const left = until - now();
      if (left <= 0) return status;
      await new Promise((r) => setTimeout(r, Math.min(pollMs, left)));
    }
  } finally {
    signal?.removeEventListener("abort", kill);
  }
}

/** Whether a sandbox can run commands detached (local and E2B can; a test double may not). */
export function canDetach(sandbox: Sandbox): sandbox is Sandbox & Required<Pick<Sandbox, "startDetached" | "detachedStatus" | "killDetached">> {
  return !!(sandbox.startDetached && sandbox.detachedStatus && sandbox.killDetached);
}

/**
 * Run a command in a step ending at `stepEndsAt`: inline when its timeout ends before the step does (or there is no
 * step budget, or the sandbox cannot detach), otherwise detached and waited for while the step lasts. `running`: it
 * still runs, detached as `id`; a later step collects it with waitDetached. `beforeDetach` may refuse (throw) before
 * anything starts. An abort kills the command and throws.
 */
export async function execWithinStep({
  sandbox,
  command,
  args,
  options = {},
  stepEndsAt,
  now = Date.now,
  signal,
  beforeDetach,
}: {
  sandbox: Sandbox;
  command: string;
  args: string[];
  options?: Omit<ExecOptions, "signal" | "stdin">;
  stepEndsAt?: number;
  now?: () => number;
  signal?: AbortSignal;
  beforeDetach?: () => void;
}): Promise<{ state: "exited"; result: ExecResult } | { state: "running"; id: string }> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  if (stepEndsAt !== undefined && canDetach(sandbox) && now() + timeoutMs > stepEndsAt) {
    beforeDetach?.();
    if (signal?.aborted) throw signal.reason ?? new Error("aborted");
    const { id } = await sandbox.startDetached(command, args, options);
    const status = await waitDetached({ sandbox, id, until: stepEndsAt, now, signal });
    return status.state === "exited" ? { state: "exited", result: status.result } : { state: "running", id };
  }
  return { state: "exited", result: await sandbox.exec(command, args, { ...options, signal }) };
}
