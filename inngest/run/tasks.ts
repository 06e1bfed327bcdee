import { RunEndedError } from "@/lib/runs/steps/context";
import { nextInLane, releaseTask } from "@/lib/runs/steps/lanes";
import { implementTurn, type TurnStepResult } from "@/lib/runs/steps/implement";
import { beginTask, finishTasks, mergeTasks, prepareTasks, type TaskMerge } from "@/lib/runs/steps/tasks";
import { laneSandboxId } from "@/lib/runs/steps/workspace";
import { dealLanes, readyTasks, type PlanDocument } from "@/lib/workflow";
import type { ImplementerState } from "@/lib/agents";
import { deadline, taskFlowOf, type RunFlow } from "./flow";
import type { Implemented } from "./implement";
import type { Plans } from "./plan";
import { gate, honourPauseRequest } from "./waits";
import * as budgets from "@/lib/runs/budget";

/*
 * Parallel tasks (limits.maxConcurrentTasks): the approved plan's tasks run in deterministic rounds of lanes. A round
 * takes every task whose dependencies are all merged, in plan order, and deals them into at most `limit` lanes
 * (round-robin: lane k gets tasks k, k+limit, …; lib/workflow/task-rounds.ts). A lane runs its tasks' sessions one
 * after another, the lanes at once (Promise.all over the lanes: parallel steps, whose ids are prefixed
 * `impl:<attempt>:task:<id>:<run>:`), so a lane's next task starts as soon as its previous one ends, whatever the other
 * lanes are doing: no barrier inside the round. Every task of the round is independent of the others still unmerged,
 * so each one's branch is cut from the run branch as it is when the task begins (with whatever of the round merged by
 * then: never a task it depends on).
 *
 * The tasks' `step.run`s are race-mode steps (Inngest's ParallelModeRace: the run is called again as each one
 * finishes), so each lane moves on at its own pace; under the default mode Inngest calls the run again only when every
 * step of the parallel batch is done, and the lanes would advance in lockstep, turn by turn, at the slowest one's pace.
 * Waits (questions, gates, sleeps) stay ordinary: a race-mode wait is a contestant in a race, settled once another wins.
 *
 * Before a lane takes its next task, one step decides whether the lane goes on — memoized, so a replay takes the same
 * decision whichever lane's promise settles first: not when a person asked for a pause (the round ends and the pause
 * opens between rounds, at the tasks' boundary), when a task of the round failed or stopped at a budget gate (the
 * attempt ends with the round), or when a task's approved re-plan changed the plan (the next round follows the new
 * plan). A task a lane does not take is left for the next round. A lane that takes it begins it in the same step (its
 * branch cut, its sandbox, its starting state, and its session's first turn: one step between a task's closing turn and
 * the next task's second turn; see begin); a lane that stops releases its sandbox there. A lane keeps one sandbox
 * (laneSandboxId): its first task's begin step makes it, and each next task's begin step takes it over from the task
 * before — whose work is committed on its own branch — re-pointed to the next task's branch, cut at the commit the
 * lane's first task started from, and cleaned (lib/runs/steps/tasks.ts beginTask), rather than removed and made again
 * on the lane's critical path. Each task's steps are given the sandbox its memoized begin step used (`workspace`). A
 * lane's sandbox goes in a step of its own as the lane ends, while the other lanes may still work. Beside the lanes,
 * the round's finished tasks are merged into the run branch as they end, in plan order — never in the order they
 * happened to finish (mergeAsTheyEnd): the round's end merges only its last tasks, side by side with the last lane's
 * release. A conflicting task runs once more on top of the merged branch in the next round; a conflict again opens a
 * `conflict` gate.
 */

type Task = PlanDocument["tasks"][number];

type Converse = (
  flow: RunFlow,
  plans: Plans,
  options: { key: string; attempt: number; state: ImplementerState; first?: TurnStepResult | null },
) => Promise<Implemented>;

type TaskOutcome = Implemented & { taskFlow: RunFlow };

/** A task begun, with its session's first turn when the step that began it made that turn too (see begin). */
type Begun = Awaited<ReturnType<typeof beginTask>> & { first?: TurnStepResult };

type TaskInput = {
  attempt: number;
  feedback: string | null;
  task: Task;
  run: number;
  round: number;
  memory?: string | null;
  /** The lane's sandbox (laneSandboxId): its tasks use it one after another. */
  workspace: string;
};

/** The lane's task before, as its memoized begin step left it: its sandbox (null: its own) and its branch's base. */
type Previous = { taskId: string; workspace: string | null; baseSha: string };

/**
 * The begin step's input for a task's run (its branch cut, its sandbox, its starting state); `previous`: the lane's
 * task before, whose sandbox it takes over.
 */
function beginInput(taskFlow: RunFlow, plans: Plans, { attempt, feedback, task, run, round, memory, workspace }: TaskInput, previous: Previous | null) {
  const key = `impl:${attempt}:task:${task.id}:${run}`;
  return {
    runId: taskFlow.runId,
    stepKey: `${key}:begin`,
    plan: plans.approved,
    taskId: task.id,
    request: taskFlow.run.request,
    feedback,
    maxIterations: taskFlow.config.limits.maxIterations,
    run,
    round,
    memory,
    workspace,
    previousTaskId: previous?.taskId ?? null,
    previous: previous ? { workspace: previous.workspace, baseSha: previous.baseSha } : null,
  };
}

/**
 * A task begun (beginTask) and, in the same step, its session's first turn, in the sandbox the task was just given —
 * the turn converse would otherwise run as the next step, with the same key (`<task key>:turn:0`), input and deadline.
 * Each of a parallel task's steps is a race-mode step, i.e. two calls of the run (the step's own and the discovery
 * after it), each replaying the run so far; a step fewer per task is two calls fewer on every lane's way from one task
 * to the next (and at the round's start), paid by parallel runs only. A re-run of the step (after a crash or an error)
 * begins the task again — its worktree re-pointed or made afresh — and makes the turn again in it, as a re-run turn
 * step does. A begin step memoized without `first` (a run from before) leaves the first turn to a step of its own.
 */
async function begin(taskFlow: RunFlow, plans: Plans, input: TaskInput, previous: Previous | null): Promise<Begun> {
  // The turn's time budget counts from the step's start, the begin's time included.
  const stepStartedAt = Date.now();
  const begun = await beginTask(beginInput(taskFlow, plans, input, previous));
  const first = await implementTurn({
    runId: taskFlow.runId,
    stepKey: `impl:${input.attempt}:task:${input.task.id}:${input.run}:turn:0`,
    state: begun.state,
    plan: plans.approved,
    attempt: input.attempt,
    deadline: deadline(taskFlow, taskFlow.stageStart, "implementation"),
    taskId: input.task.id,
    workspace: begun.workspace ?? null,
    stepStartedAt,
  });
  return { ...begun, first };
}

/**
 * One task's session in its own flow (its own waits and counts): its branch, sandbox, starting state and first turn —
 * begun already by the lane's deciding step (`begun`), else in a step of its own — then its other turns, in the sandbox
 * its begin step memoized (a begin step memoized before lanes had a sandbox of their own: the task's own).
 */
async function runTask(taskFlow: RunFlow, plans: Plans, converse: Converse, input: TaskInput, begun: Begun | null): Promise<TaskOutcome & { begun: Begun }> {
  const key = `impl:${input.attempt}:task:${input.task.id}:${input.run}`;
  const started = begun ?? (await taskFlow.runStep(`${key}:begin`, () => begin(taskFlow, plans, input, null)));
  taskFlow.task = { id: input.task.id, workspace: started.workspace ?? null };
  // The run's plans, shared: a task's approved re-plan is the run's new plan (the rounds read it).
  const session = await converse(taskFlow, plans, { key, attempt: input.attempt, state: started.state as ImplementerState, first: started.first ?? null });
  return { ...session, taskFlow, begun: started };
}

/** What a round's lanes share while they run: why the lanes take no more tasks, once one of them knows. */
type RoundState = { plan: PlanDocument; halt: string | null };

/** A task a lane ran: its run's number, how its session ended, its sandbox (null: its own) and its branch's base. */
type Ran = { task: Task; run: number; outcome: TaskOutcome; workspace: string | null; baseSha: string };

type Lane = { ran: Ran[]; flow: RunFlow | null };

/**
 * One lane of a round: its tasks one after another, each in its own flow carrying on from the lane's previous one (the
 * working stretch, and what people added at its budget gates). Before each task after the first, a step decides
 * whether the lane takes it (see the header); the decision is memoized, so it never depends on which lane got there
 * first on a replay.
 */
async function runLane(
  flow: RunFlow,
  plans: Plans,
  converse: Converse,
  shared: RoundState,
  runs: Record<string, number>,
  {
    attempt,
    feedback,
    tasks,
    round,
    memory,
    race,
    workspace,
    onEnded,
  }: {
    attempt: number;
    feedback: string | null;
    tasks: Task[];
    round: number;
    memory?: string | null;
    race: boolean;
    /** The lane's sandbox (laneSandboxId), handed from task to task. */
    workspace: string;
    /** A task's session has ended (the round's merges take it from here, in plan order: see mergeAsTheyEnd). */
    onEnded: (ran: Ran) => void;
  },
): Promise<Lane> {
  const lane: Lane = { ran: [], flow: null };
  /**
   * The lane's task whose session ended, handed to the round's merges (onEnded) once the lane has begun its next task
   * or stops: the step that begins the next task is on the lane's way, the merge is not (nothing of the round waits for
   * it before the round's end, and the next task is cut from the lane's own start), so the merge's git work runs beside
   * the next task's turns rather than beside its begin. The lane's last task is handed over at once.
   */
  let ending: Ran | null = null;
  const hand = () => {
    if (ending) onEnded(ending);
    ending = null;
  };
  for (const task of tasks) {
    const taskFlow = taskFlowOf(flow, task.id, { race });
    const previous = lane.flow;
    if (previous) {
      taskFlow.stageStart = Math.max(taskFlow.stageStart, previous.stageStart);
      taskFlow.budgetRaised = { ...previous.budgetRaised };
    }
    lane.flow = taskFlow;
    const before = lane.ran.at(-1);
    const input = { attempt, feedback, task, run: (runs[task.id] ?? 0) + 1, round, memory, workspace };
    let begun: Begun | null = null;
    if (before) {
      // Whether the lane takes it — the halt read when the step runs (memoized) — and, when it does, the task begun in
      // the same step, in the lane's sandbox handed on: one step between a lane's tasks. A run that memoized this
      // step's decision alone (no `begun`) begins the task in the task's own begin step, as it did then.
      const key = `impl:${attempt}:round:${round}:next:${task.id}`;
      const previous = { taskId: before.task.id, workspace: before.workspace, baseSha: before.baseSha };
      const next = (await taskFlow.runStep(key, async () => {
        const halt = shared.halt ?? (shared.plan !== plans.approved ? "replanned" : null);
        const decided = await nextInLane({ runId: flow.runId, previousTaskId: before.task.id, previousWorkspace: before.workspace, halt });
        return decided.take ? { ...decided, begun: await begin(taskFlow, plans, input, previous) } : decided;
      })) as Awaited<ReturnType<typeof nextInLane>> & { begun?: Begun };
      hand();
      if (!next.take) return lane;
      begun = next.begun ?? null;
    }
    const run = (runs[task.id] = input.run);
    const { begun: started, ...outcome } = await runTask(taskFlow, plans, converse, input, begun);
    const ran: Ran = { task, run, outcome, workspace: started.workspace ?? null, baseSha: started.baseSha };
    lane.ran.push(ran);
    ending = ran;
    // This lane takes no task of the old plan after an approved re-plan; a failure or a budget stop ends the attempt,
    // and the other lanes see it at their next task boundary.
    if (outcome.replanned) {
      hand();
      return lane;
    }
    if (outcome.failure || outcome.budgetStopped) {
      shared.halt ??= outcome.failure ? "failure" : "budget";
      break;
    }
  }
  hand();
  // The lane's last task's sandbox goes now, while other lanes may still work (its session ended at a re-plan: dropped).
  const final = lane.ran.at(-1);
  if (final) {
    const key = `impl:${attempt}:task:${final.task.id}:${final.run}:release`;
    await lane.flow!.runStep(key, () => releaseTask({ runId: flow.runId, taskId: final.task.id, workspace: final.workspace }));
  }
  return lane;
}

/** How a round's task ended: its session (`null`: no lane took it this round). */
type Ended = Ran | null;

/** A task whose session finished (a budget stop included) is merged; not one that failed or ended at a re-plan. */
const mergeable = (ended: Ended): ended is Ran => !!ended && !ended.outcome.failure && !ended.outcome.replanned;

/** The round's tasks as their sessions end, each one awaitable; a lane ends every task it did not take as it returns. */
function endings(batch: Task[]) {
  const known = new Map<string, Ended>();
  const settle = new Map<string, (ended: Ended) => void>();
  const waits = new Map(batch.map((t) => [t.id, new Promise<Ended>((resolve) => settle.set(t.id, resolve))]));
  return {
    end(taskId: string, ended: Ended) {
      if (known.has(taskId)) return;
      known.set(taskId, ended);
      settle.get(taskId)?.(ended);
    },
    has: (taskId: string) => known.has(taskId),
    get: (taskId: string): Ended => known.get(taskId) ?? null,
    wait: (taskId: string) => waits.get(taskId)!,
  };
}

type Endings = ReturnType<typeof endings>;

/**
 * The round's merges, made as its tasks end rather than after the last one, and always in plan order: the first task
 * in plan order not merged yet is awaited, then one step merges it together with every task after it whose session has
 * ended by the time the step runs, up to the first one still running (a prefix of the plan order; a task that failed,
 * ended at a re-plan or was not taken is passed over). Which tasks a step took is its memoized result, so a replay —
 * whatever order the lanes' steps come back in — takes the same merges, and the next step starts after them. The step's
 * id names the task it starts from (`impl:<attempt>:round:<n>:merge:from:<id>`); it runs in that task's flow (a race-mode
 * step beside the lanes' own, and a full disk pauses the run as that task). Its sandbox is not the step's to release:
 * the lane releases it, side by side with the merge. A step re-run after a crash finds its tasks merged (mergeTasks).
 */
async function mergeAsTheyEnd(
  flow: RunFlow,
  plans: Plans,
  { attempt, round, batch, ended, race, conflicted }: { attempt: number; round: number; batch: Task[]; ended: Endings; race: boolean; conflicted: Set<string> },
  kept: string[],
): Promise<Map<string, TaskMerge>> {
  const merges = new Map<string, TaskMerge>();
  for (let i = 0; i < batch.length; ) {
    const first = await ended.wait(batch[i]!.id);
    if (!mergeable(first)) {
      i++;
      continue;
    }
    const key = `impl:${attempt}:round:${round}:merge:from:${first.task.id}`;
    const from = i;
    const step = await taskFlowOf(flow, first.task.id, { race }).runStep(key, async () => {
      const prefix: string[] = [];
      for (let j = from; j < batch.length && ended.has(batch[j]!.id); j++) prefix.push(batch[j]!.id);
      const tasks = prefix.flatMap((id) => {
        const ran = ended.get(id);
        return mergeable(ran) ? [{ taskId: id, next: conflicted.has(id) ? ("gate" as const) : ("rerun" as const), workspace: ran.workspace }] : [];
      });
      const approved = plans.approved;
      const merged = await mergeTasks({ runId: flow.runId, stepKey: key, plan: approved, tasks });
      // What it took: up to the last task it merged (a re-run after a crash takes what its first run recorded).
      const last = Math.max(from, ...merged.merges.map((m) => batch.findIndex((t) => t.id === m.taskId)));
      return { took: batch.slice(from, last + 1).map((t) => t.id), ...merged };
    });
    for (const merged of step.merges) merges.set(merged.taskId, merged);
    kept.push(...step.kept);
    i += Math.max(1, step.took.length);
  }
  return merges;
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
  /** Merged tasks' branches a merge step left for the attempt's end (their worktrees were still being released). */
  const kept: string[] = [];
  const states: ImplementerState[] = [];
  let last: ImplementerState | null = null;
  let failure: string | null = null;
  let budgetStopped = false;
  for (let round = 1; ; round++) {
    const plan = plans.approved;
    const ready = readyTasks(plan.tasks, done, skipped, alone);
    let batch: Task[];
    if (ready.length) batch = ready;
    else if (alone.length) batch = plan.tasks.filter((t) => t.id === alone[0]).slice(0, 1);
    else break;
    if (!batch.length) break;
    if (!ready.length) alone.shift();
    // A pause a person asked for is honoured here, between rounds: at the tasks' boundary.
    if (round > 1) await honourPauseRequest(flow, `impl:${attempt}:round:${round}`, "implementation");
    const lanes = dealLanes(batch, limit);
    const shared: RoundState = { plan, halt: null };
    const race = lanes.length > 1;
    // The lanes, and beside them the round's merges in plan order as the tasks end (mergeAsTheyEnd).
    const ended = endings(batch);
    const [merges, ...ran] = await Promise.all([
      mergeAsTheyEnd(flow, plans, { attempt, round, batch, ended, race, conflicted }, kept),
      ...lanes.map((tasks, k) =>
        runLane(flow, plans, converse, shared, runs, {
          attempt,
          feedback,
          tasks,
          round,
          memory,
          race,
          workspace: laneSandboxId(runId, round, k + 1),
          onEnded: (r) => ended.end(r.task.id, r),
        }).then((lane) => {
          for (const task of tasks) ended.end(task.id, null);
          return lane;
        }),
      ),
    ]);
    // What the sessions' own waits and budget gates moved, folded back lane by lane (each lane's last flow carries its
    // tasks' raises): the latest working stretch, and every raise a person gave at a task's budget gate.
    const before = { ...flow.budgetRaised };
    for (const { flow: laneFlow } of ran) {
      if (!laneFlow) continue;
      flow.stageStart = Math.max(flow.stageStart, laneFlow.stageStart);
      for (const stage of ["planning", "implementation", "validation"] as const) {
        const mine = laneFlow.budgetRaised[stage];
        const added = { tokens: mine.tokens - before[stage].tokens, costUsd: mine.costUsd - before[stage].costUsd, minutes: mine.minutes - before[stage].minutes };
        flow.budgetRaised[stage] = budgets.addSpent(flow.budgetRaised[stage], added);
      }
    }
    // The tasks that ran, in plan order (a task a lane did not take is left for the next round).
    const outcomes = new Map(ran.flatMap((lane) => lane.ran).map((r) => [r.task.id, r]));
    const taken = batch.flatMap((task) => outcomes.get(task.id) ?? []);
    // The finished tasks, merged in plan order (as they ended, above).
    const finished: Array<{ task: Task; run: number }> = [];
    for (const { task, run, outcome } of taken) {
      last = outcome.state;
      // Its session ended at an approved re-plan: nothing to merge; the next rounds follow the new plan.
      if (outcome.replanned) continue;
      if (outcome.failure) {
        failure ??= `Task ${task.id}: ${outcome.failure}`;
        continue;
      }
      if (outcome.budgetStopped) budgetStopped = true;
      states.push(outcome.state);
      finished.push({ task, run });
    }
    if (!finished.length) {
      // Nothing to merge: the next round follows a new plan, or runs what the lanes left (a pause opens first).
      if ((taken.some((t) => t.outcome.replanned) || taken.length < batch.length) && !failure && !budgetStopped) continue;
      break;
    }
    for (const { task, run } of finished) {
      const merged = merges.get(task.id);
      if (!merged) throw new Error(`Task ${task.id} finished in round ${round} but was not merged.`);
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
  await runStep(finishKey, () => finishTasks({ runId, stepKey: finishKey, attempt, failure, kept }));
  return { state: combined(states, last), failure, budgetStopped };
}
