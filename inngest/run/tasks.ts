import { RunEndedError } from "@/lib/runs/steps/context";
import { beginTask, finishTasks, mergeTasks, prepareTasks } from "@/lib/runs/steps/tasks";
import { readyTasks, type PlanDocument } from "@/lib/workflow";
import type { ImplementerState } from "@/lib/agents";
import { taskFlowOf, type RunFlow } from "./flow";
import type { Implemented } from "./implement";
import type { Plans } from "./plan";
import { gate, honourPauseRequest } from "./waits";
import * as budgets from "@/lib/runs/budget";

/*
 * Parallel tasks (limits.maxConcurrentTasks): the approved plan's tasks run in deterministic rounds. A round takes the
 * tasks whose dependencies are all merged, in plan order, at most `limit` of them, and runs their sessions at once
 * (Promise.all over per-task loops: parallel steps, whose ids are prefixed `impl:<attempt>:task:<id>:<run>:`). Their
 * `step.run`s are race-mode steps (Inngest's ParallelModeRace: the run is called again as each one finishes), so each
 * task moves on at its own pace; under the default mode Inngest calls the run again only when every step of the
 * parallel batch is done, and the tasks would advance in lockstep, turn by turn, at the slowest one's pace. Waits
 * (questions, gates, sleeps) stay ordinary: a race-mode wait is a contestant in a race, settled once another wins. When
 * every session of the round has ended, the finished tasks' branches are merged into the run branch in plan order —
 * never in the order they happened to finish, so a replay takes the same decisions. A conflicting task runs once more
 * on top of the merged branch; a conflict again opens a `conflict` gate.
 */

type Task = PlanDocument["tasks"][number];

type Converse = (flow: RunFlow, plans: Plans, options: { key: string; attempt: number; state: ImplementerState }) => Promise<Implemented>;

type TaskOutcome = Implemented & { taskFlow: RunFlow };

/** One task's session: its branch and starting state, then its turns in its own flow (its own waits and counts). */
async function runTask(
  flow: RunFlow,
  plans: Plans,
  converse: Converse,
  {
    attempt,
    feedback,
    task,
    run,
    round,
    memory,
    race,
  }: { attempt: number; feedback: string | null; task: Task; run: number; round: number; memory?: string | null; race: boolean },
): Promise<TaskOutcome> {
  const key = `impl:${attempt}:task:${task.id}:${run}`;
  const taskFlow = taskFlowOf(flow, task.id, { race });
  const plan = plans.approved;
  const begun = await taskFlow.runStep(`${key}:begin`, () =>
    beginTask({
      runId: flow.runId,
      stepKey: `${key}:begin`,
      plan,
      taskId: task.id,
      request: flow.run.request,
      feedback,
      maxIterations: flow.config.limits.maxIterations,
      run,
      round,
      memory,
    }),
  );
  // The run's plans, shared: a task's approved re-plan is the run's new plan (the rounds read it).
  const session = await converse(taskFlow, plans, { key, attempt, state: begun.state as ImplementerState });
  return { ...session, taskFlow };
}

/** The sessions' states as one (the implementation gate shows the summary): every todo, every summary in plan order. */
function combined(states: ImplementerState[], fallback: ImplementerState | null): ImplementerState {
  const last = states.at(-1) ?? fallback;
  if (!last) throw new Error("No task ran.");
  const summaries = states.map((s) => s.summary?.trim()).filter(Boolean);
  return { ...last, todos: states.flatMap((s) => s.todos), summary: summaries.length ? summaries.join("\n\n") : last.summary };
}

export async function implementInParallel(
  flow: RunFlow,
  plans: Plans,
  { attempt, feedback, skip, converse }: { attempt: number; feedback: string | null; skip: Array<{ id: string }>; converse: Converse },
): Promise<Implemented> {
  const { runId, runStep, config } = flow;
  const limit = config.limits.maxConcurrentTasks;
  // The memory read once for every task (a run from before it was read here has none memoized: each task reads it).
  const { memory } = (await runStep(`impl:${attempt}:tasks:prepare`, () => prepareTasks({ runId }))) as { memory?: string | null };
  const skipped = new Set(skip.map((s) => s.id));
  /** Merged into the run branch, or given up at a conflict gate (the run branch accepted as it is). */
  const done = new Set<string>();
  /** Runs so far per task (a re-run after a conflict, or after a re-plan, is the 2nd). */
  const runs: Record<string, number> = {};
  /** Tasks that conflicted once already: a second conflict opens the conflict gate. */
  const conflicted = new Set<string>();
  /** Tasks a person chose to retry alone once the others are done (conflict gate: approve). */
  const alone: string[] = [];
  const states: ImplementerState[] = [];
  let last: ImplementerState | null = null;
  let failure: string | null = null;
  let budgetStopped = false;
  for (let round = 1; ; round++) {
    const plan = plans.approved;
    const ready = readyTasks(plan.tasks, done, skipped, alone);
    let batch: Task[];
    if (ready.length) batch = ready.slice(0, limit);
    else if (alone.length) batch = plan.tasks.filter((t) => t.id === alone[0]).slice(0, 1);
    else break;
    if (!batch.length) break;
    if (!ready.length) alone.shift();
    // A pause a person asked for is honoured here, between rounds: at the tasks' boundary.
    if (round > 1) await honourPauseRequest(flow, `impl:${attempt}:round:${round}`, "implementation");
    const outcomes = await Promise.all(
      batch.map((task) => {
        const run = (runs[task.id] = (runs[task.id] ?? 0) + 1);
        return runTask(flow, plans, converse, { attempt, feedback, task, run, round, memory, race: batch.length > 1 });
      }),
    );
    // What the sessions' own waits and budget gates moved, folded back in plan order: the latest working stretch,
    // and every raise a person gave at a task's budget gate.
    const before = { ...flow.budgetRaised };
    for (const outcome of outcomes) {
      flow.stageStart = Math.max(flow.stageStart, outcome.taskFlow.stageStart);
      for (const stage of ["planning", "implementation", "validation"] as const) {
        const mine = outcome.taskFlow.budgetRaised[stage];
        const added = { tokens: mine.tokens - before[stage].tokens, costUsd: mine.costUsd - before[stage].costUsd, minutes: mine.minutes - before[stage].minutes };
        flow.budgetRaised[stage] = budgets.addSpent(flow.budgetRaised[stage], added);
      }
    }
    // The finished tasks, merged in plan order (one step for the round).
    const finished: Array<{ task: Task; run: number }> = [];
    for (const [i, task] of batch.entries()) {
      const outcome = outcomes[i]!;
      last = outcome.state;
      // Its session ended at an approved re-plan: nothing to merge; the next rounds follow the new plan.
      if (outcome.replanned) continue;
      if (outcome.failure) {
        failure ??= `Task ${task.id}: ${outcome.failure}`;
        continue;
      }
      if (outcome.budgetStopped) budgetStopped = true;
      states.push(outcome.state);
      finished.push({ task, run: runs[task.id]! });
    }
    if (!finished.length) {
      if (outcomes.some((o) => o.replanned) && !failure) continue;
      break;
    }
    const key = `impl:${attempt}:round:${round}:merge`;
    const approved = plans.approved;
    const toMerge = finished.map(({ task }) => ({ taskId: task.id, next: conflicted.has(task.id) ? ("gate" as const) : ("rerun" as const) }));
    const { merges } = await runStep(key, () => mergeTasks({ runId, stepKey: key, plan: approved, tasks: toMerge }));
    for (const [i, merged] of merges.entries()) {
      const { task, run } = finished[i]!;
      if (merged.status === "merged") {
        done.add(task.id);
        continue;
      }
      // The first conflict: the task runs once more, on top of the merged branch (it is ready again next round).
      if (!conflicted.has(task.id)) {
        conflicted.add(task.id);
        continue;
      }
      const decision = await gate(flow, `impl:${attempt}:task:${task.id}:${run}:conflict-gate`, "conflict", {
        taskId: task.id,
        title: task.title,
        branch: merged.branch,
        files: merged.files,
        sides: merged.sides,
        reason: `Task ${task.id}'s branch conflicts with the run branch in ${merged.files.length} file(s), after running again on top of it.`,
        choices: {
          approve: "Retry this task alone, after the other tasks",
          reject: "Accept the run branch as it is (without this task's work)",
          cancel: "Cancel the run",
        },
      });
      if (decision.decision === "cancel") throw new RunEndedError("cancelled");
      if (decision.decision === "approve") alone.push(task.id);
      else done.add(task.id);
    }
    if (failure || budgetStopped) break;
  }
  const finishKey = `impl:${attempt}:tasks:finish`;
  await runStep(finishKey, () => finishTasks({ runId, stepKey: finishKey, attempt, failure }));
  return { state: combined(states, last), failure, budgetStopped };
}
