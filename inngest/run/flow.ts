import type { GetStepTools } from "inngest";
import type { inngest } from "../client";
import { NOTHING_SPENT, type BudgetStage, type Spent } from "@/lib/runs/budget";
import { loadRun, RunEndedError, type RunContext } from "@/lib/runs/steps/context";
import { storageFailure } from "@/lib/runs/steps/pause";
import { databaseAway, noteDatabaseAway, recordDatabaseOutage } from "@/lib/runs/steps/database";
import { pauseUntilResumed } from "./waits";
import type { RunConfig, Stage } from "@/lib/workflow";

/*
 * One run's durable flow, as the run-workflow function and its stage helpers (./waits, ./plan, ./implement,
 * ./validate, ./deliver) share it. Every side effect runs inside a step (lib/runs/steps/), so a crash never repeats a
 * finished one; code between steps only decides what to do next from memoized results, which keeps it deterministic
 * on every replay. What the flow keeps between steps (below) is computed from those results alone.
 */

export type Step = GetStepTools<typeof inngest>;

/** The key under which a step memoizes "the run had already ended" (see runStep). */
const ENDED = "__runEnded";

export type RunFlow = {
  runId: string;
  step: Step;
  /** The run as its `load` step read it. */
  run: RunContext;
  config: RunConfig;
  /**
   * step.run, except that a step finding its run ended (cancelled meanwhile) is an ordinary outcome, not a step
   * error: it is memoized as such and ends the function quietly (RunEndedError, caught by the function), with one
   * info line in the log.
   */
  runStep: <T>(id: string, fn: () => Promise<T>) => Promise<T>;
  /**
   * When the stage's current working stretch began: the stage's start, or the end of the last wait for a person (a
   * pause, a gate, a question), whichever is later. `timeoutMinutes` counts from here: the time people take to decide
   * is never a stage's working time. Every wait (./waits) moves it (from its memoized decision's time).
   */
  stageStart: number;
  /** What people added to each stage's budget at budget gates (memoized decisions: replays add the same). */
  budgetRaised: Record<BudgetStage, Spent>;
  /** Debug steps per task so far (the verdicts' attempts; a retry at the fix gate starts the count afresh). */
  debugAttempts: Record<string, number>;
  /**
   * Set in a parallel task's own flow (./tasks.ts): its waits for a person open one at a time across the run's tasks,
   * and the run keeps its slot while it waits (the other tasks compute on). `workspace`: the sandbox its steps use, its
   * lane's (from its memoized begin step), else its own.
   */
  task?: { id: string; workspace?: string | null } | null;
};

/** The key under which a step memoizes "the disk was full or read-only" (see runStep). */
const STORAGE = "__storageFailure";
/**
 * ...and when the step that failed so began: a parallel task's failure is covered by a pause for the disk open now or
 * resumed since then (the failure itself may be seen late, after a person resumed the pause it belongs to).
 */
const STORAGE_AT = "__storageFailureAt";
/** The key under which a step memoizes "the database was away" (see runStep), and the wait before it runs again. */
const DATABASE = "__databaseAway";
const DATABASE_RETRY = "5s";

/** Which stage a step belongs to, by its key's prefix (for the pause's stage). */
function stageOf(id: string): Stage | null {
  if (/^(plan|planning)/.test(id)) return "planning";
  if (/^impl/.test(id)) return "implementation";
  if (/^(validat|fix)/.test(id)) return "validation";
  if (/^deliver/.test(id)) return "delivery";
  return null;
}

function stepRunner(step: Step, flow: () => RunFlow | null, race = false): RunFlow["runStep"] {
  return async function runStep<T>(id: string, fn: () => Promise<T>): Promise<T> {
    // A step that failed on a full or read-only disk pauses the run (reason "storage") rather than failing it; once a
    // person resumes, the same work runs again in a step of its own (its events keep the original step key). A step
    // that failed because the database was away waits a little and runs again the same way, for as long as it stays
    // away (lib/runs/steps/database.ts: the outage is recorded as a pause once the database takes writes again).
    let again: "storage" | "database" = "storage";
    for (let n = 0; ; n++) {
      const stepId = n === 0 ? id : `${id}:after-${again}:${n}`;
      const out = (await step.run(race ? { id: stepId, parallelMode: "race" } : stepId, async () => {
        const runId = flow()?.runId;
        const began = Date.now();
        try {
          if (runId) await recordDatabaseOutage(runId, stepId);
          return await fn();
        } catch (error) {
          if (error instanceof RunEndedError) return { [ENDED]: error.status };
          if (runId && databaseAway(error)) {
            noteDatabaseAway(runId, error);
            // Stored by the executor only once it can write again; until then the step is simply driven again.
            return { [DATABASE]: true };
          }
          const storage = flow() && !id.includes(":storage:") ? storageFailure(error) : null;
          if (storage) return { [STORAGE]: storage, [STORAGE_AT]: began };
          throw error;
        }
      })) as unknown;
      const ended = (out as Record<string, unknown> | null)?.[ENDED];
      if (typeof ended === "string") throw new RunEndedError(ended);
      if ((out as Record<string, unknown> | null)?.[DATABASE] === true) {
        again = "database";
        await step.sleep(`${id}:database:${n}`, DATABASE_RETRY);
        continue;
      }
      const storage = (out as Record<string, unknown> | null)?.[STORAGE];
      if (typeof storage === "string") {
        again = "storage";
        const at = (out as Record<string, unknown>)[STORAGE_AT];
        await pauseUntilResumed(flow()!, `${id}:storage:${n}`, "storage", storage, stageOf(id), null, typeof at === "number" ? at : undefined);
        continue;
      }
      return out as T;
    }
  };
}

/** The flow of run `runId`: its `load` step, then nothing kept yet. */
export async function loadFlow({ runId, step }: { runId: string; step: Step }): Promise<RunFlow> {
  let flow: RunFlow | null = null;
  const runStep = stepRunner(step, () => flow);
  const run = await runStep("load", () => loadRun({ runId }));
  flow = {
    runId,
    step,
    run,
    config: run.config,
    runStep,
    stageStart: 0,
    budgetRaised: { planning: NOTHING_SPENT, implementation: NOTHING_SPENT, validation: NOTHING_SPENT },
    debugAttempts: {},
  };
  return flow;
}

/**
 * A parallel task's own flow: its waits and counts are its own, and so is its runStep — a step of the task that meets a
 * full disk pauses the run as the task (one wait for a person at a time across the tasks), not as the run's own flow.
 * `race`: its `step.run`s and `step.sendEvent`s are race-mode steps (Inngest calls the run again as soon as each one
 * finishes, so the task moves on while its siblings' steps still run; see ./tasks.ts). Its waits stay ordinary.
 */
export function taskFlowOf(flow: RunFlow, taskId: string, { race }: { race: boolean }): RunFlow {
  const taskFlow: RunFlow = { ...flow, task: { id: taskId }, budgetRaised: { ...flow.budgetRaised }, debugAttempts: {} };
  if (race) taskFlow.step = raceSends(flow.step);
  taskFlow.runStep = stepRunner(flow.step, () => taskFlow, race);
  return taskFlow;
}

/**
 * The step tools with `sendEvent` as a race-mode step (the task's other tools unchanged). A task's sendEvent (a question's
 * or gate's notification, a deadline's reminder) is a step like any other: an ordinary one that ends while another
 * task's race-mode step still runs is coalesced with it — Inngest calls the run again only once no step is pending
 * (request version 2) — so the task would stand still, its wait for the answer not even stored, until the other task's
 * step ended (a command of minutes). Race mode changes nothing else: the event is sent once, as before.
 */
function raceSends(step: Step): Step {
  const sendEvent = ((idOrOptions: Parameters<Step["sendEvent"]>[0], payload: Parameters<Step["sendEvent"]>[1]) =>
    step.sendEvent(
      typeof idOrOptions === "string" ? { id: idOrOptions, parallelMode: "race" } : { ...idOrOptions, parallelMode: "race" },
      payload,
    )) as Step["sendEvent"];
  return new Proxy(step, { get: (target, key, receiver) => (key === "sendEvent" ? sendEvent : Reflect.get(target, key, receiver)) });
}

/** Stage deadlines come from memoized step times, so replays take the same decisions. */
export function deadline(flow: RunFlow, startedAt: number, stage: Exclude<Stage, "delivery">) {
  return startedAt + flow.config.timeoutMinutes[stage] * 60_000;
}
