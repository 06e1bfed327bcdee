import { getRunState, listEvents } from "@/lib/db/event-store";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { AppError } from "@/lib/errors";
import { redact, redactDeep } from "@/lib/redact";
import { contextWindowOf, isModelCallError } from "@/lib/ai";
import {
  answerClarification as answerImplementerClarification,
  applyPolicyDecision,
  applyReplanDecision,
  applySentBackDecision,
  collectCommand,
  implementerTurn,
  StepBudgetExceededError,
  startImplementer,
  waitDetached,
  type ImplementerState,
  type ImplementerTurnResult,
  type PolicyAction,
  type PromptInfo,
} from "@/lib/agents";
import { section } from "@/lib/ai/prompt-sections";
import { loadConversation, storeConversation } from "../conversation";
import { attachSandbox, releaseSandbox, type Sandbox } from "@/lib/sandbox";
import { commitCheckpoint, DIFF_SAFE, git, nothingToCommit, readLatestMemory, rollbackToCheckpoint, type WorktreeLocation } from "@/lib/git";
import type { NewRunEvent, PlanDocument } from "@/lib/workflow";
import { append, baseShaOf, loadRun, modelCallKey, RunEndedError, stepBudget, workflowClock, type WithNow } from "./context";
import { END_POLL_MS, endedStatus, watchForEnd } from "./end";
import { toAgentPlan } from "./plan";
import { stageInstructions } from "./instructions";
import { listMcpSession } from "./mcp";

export { callMcpTool } from "./mcp";
import { checkTasksFile } from "./tasks-file";
import { restoreFromCheckpoint, runSandbox } from "./workspace";
import { describeLeaks, scanChangesForSecrets } from "../secret-scan";

/*
 * Implementation: the implementer's starting state, one turn per step (checkpoints, refusals, secrets withheld), a
 * command left running detached looked at in later steps, and what a person decided told back to the implementer.
 */

/** The implementer's starting state: the approved plan, the request, the fix feedback and the project memory. */
export async function beginImplementation({
  runId,
  plan: doc,
  request,
  feedback,
  maxIterations,
  skip,
  task,
  memory: given,
  sandbox: sessionSandbox,
}: {
  runId: string;
  plan: PlanDocument;
  request: string;
  feedback: string | null;
  maxIterations: number;
  /** The project memory as read once for the run's parallel tasks (each task's session would read the same). */
  memory?: string | null;
  /** Tasks triage found already done: not the implementer's to do. */
  skip?: Array<{ id: string; evidence: string[] }>;
  /** A parallel task's own session: only this task, told what its dependencies changed. */
  task?: { id: string; dependencies: string };
  /** The session's sandbox, when the caller makes it (a parallel task's begin step): MCP servers start in it. */
  sandbox?: () => Promise<Sandbox>;
}): Promise<ImplementerState> {
  const run = await loadRun({ runId });
  const memory = given !== undefined ? { raw: given } : await readLatestMemory({ repoPath: run.repoPath, ref: run.branch });
  // A parallel task's session reads the instructions nearest its own files; the run's single session, every task's.
  const touched = [...new Set(doc.tasks.filter((t) => !task || t.id === task.id).flatMap((t) => t.files ?? []))];
  const instructions = await stageInstructions({ run, stage: "implementation", touched });
  const state = startImplementer({ plan: await toAgentPlan(doc), request, memory: memory.raw ?? undefined, instructions, feedback: feedback ?? undefined, maxIterations, skip, task });
  // MCP servers: their tools are listed once for the session (a stdio server starts in the session's sandbox to say them).
  const mcp = await listMcpSession({ run, sandbox: sessionSandbox ?? (async () => attachSandbox(runSandbox(run, task?.id ?? null))) });
  const messages = mcp.note ? [...state.messages, { role: "user" as const, content: section("mcp-servers", mcp.note) }] : state.messages;
  return { ...state, messages, ...(mcp.session ? { mcp: mcp.session } : {}) };
}

export function applyAnswer(state: ImplementerState, answer: string): ImplementerState {
  return answerImplementerClarification(state, answer);
}

/** A person's decision on a policy gate, told to the implementer (pure: the workflow calls it outside any step). */
export function applyPolicy(state: ImplementerState, action: PolicyAction, decision: { decision: string; decidedBy?: string | null; notes?: string | null }) {
  return applyPolicyDecision(state, action, { approved: decision.decision === "approve", by: decision.decidedBy ?? null, notes: decision.notes ?? null });
}

/** The plan gate's decision on the implementer's re-plan, told to it (pure: the workflow calls it outside any step). */
export async function applyReplan(
  state: ImplementerState,
  decision: { approved: boolean; plan: PlanDocument | null; notes: string | null },
): Promise<ImplementerState> {
  return applyReplanDecision(state, { approved: decision.approved, plan: decision.plan ? await toAgentPlan(decision.plan) : null, notes: decision.notes });
}

/** The plan gate's decision on a re-plan a person asked for by sending the implementer's question back to planning. */
export async function applySentBack(
  state: ImplementerState,
  decision: { approved: boolean; plan: PlanDocument | null; notes: string | null },
): Promise<ImplementerState> {
  return applySentBackDecision(state, { approved: decision.approved, plan: decision.plan ? await toAgentPlan(decision.plan) : null, notes: decision.notes });
}

/** The durable sleep between two looks at a command left running detached. */
export const COMMAND_POLL_INTERVAL = "1s";

export type TurnStepResult =
  | WithNow<ImplementerTurnResult>
  /** The model call did not answer within the step's budget: the turn runs again in a fresh step (not a model error). */
  | WithNow<{ kind: "step_budget"; state: ImplementerState }>
  | WithNow<{ kind: "model_error"; reason: string; message: string }>
  | WithNow<{ kind: "secret_detected"; state: ImplementerState; files: string[]; message: string }>
  | WithNow<{ kind: "pause_requested"; by: string; message: string }>;

export async function implementTurn({
  runId,
  stepKey,
  state,
  plan: doc,
  attempt,
  deadline,
  taskId = null,
  workspace = null,
  stepStartedAt = Date.now(),
}: {
  runId: string;
  stepKey: string;
  state: ImplementerState;
  plan: PlanDocument;
  attempt: number;
  /** The implementation stage's deadline (epoch ms): the turn's model call and commands are aborted when it passes. */
  deadline?: number;
  /**
   * A parallel task's turn: in the task's own sandbox (its worktree on its branch). A pause request waits for the
   * task boundary (the workflow honours it between rounds); the implementation's own outcome is the workflow's to record.
   */
  taskId?: string | null;
  /** A parallel task's sandbox when it is its lane's (beginTask), not its own. */
  workspace?: string | null;
  /** When the step this turn runs in began (the step's time budget counts from there): now, unless it did more first. */
  stepStartedAt?: number;
}): Promise<TurnStepResult> {
  // A person asked for a pause: this turn does not start; the workflow parks the run (work committed, sandbox freed).
  const pauseRequest = taskId ? null : await pendingPauseRequest({ runId });
  if (pauseRequest) {
    const message = `Paused by a person${pauseRequest.note ? `: ${redact(pauseRequest.note)}` : ""}. Resume it to continue where it stopped.`;
    return { kind: "pause_requested", by: pauseRequest.by, message, now: workflowClock.now() };
  }
  const run = await loadRun({ runId });
  const sandbox = await attachSandbox(runSandbox(run, taskId, workspace));
  // A cancellation stops the turn where it is: the model call and any command it runs are aborted within a poll.
  const cancelled = watchForEnd(runId);
  // The stage deadline cuts a hung model call or command where it is, instead of after it returns.
  const overtime = new AbortController();
  // Polled against workflowClock (not a one-shot timer), so the deadline is the same clock the workflow's checks use.
  const deadlineTimer =
    deadline === undefined ? null : setInterval(() => workflowClock.now() > deadline && overtime.abort(new Error("stage deadline")), END_POLL_MS);
  let result;
  // The step's state carries a reference to the conversation (lib/runs/conversation.ts); the turn sees all of it.
  const loaded = await loadConversation(state);
  // Real time, not workflowClock: the host cuts the call by the wall clock.
  const stepEndsAt = stepStartedAt + stepBudget.ms();
  let prompt: PromptInfo | null = null;
  const contextConfig = run.config.context;
  try {
    result = await implementerTurn({
      contextBudget: {
        window: contextWindowOf(run.config.modelRouting.implementer, contextConfig?.window),
        summariseAt: contextConfig?.summariseAt ?? 0.7,
        keepToolResults: contextConfig?.keepToolResults ?? 6,
      },
      onPrompt: (info) => {
        prompt = info;
      },
      stepEndsAt,
      now: Date.now,
      state: loaded,
      sandbox,
      modelId: run.config.modelRouting.implementer,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
      signal: AbortSignal.any([cancelled.signal, overtime.signal]),
      policy: run.config.policy,
      scope: [...new Set(doc.tasks.flatMap((t) => t.files ?? []))],
      restore: (paths) => restoreFromCheckpoint(sandbox, paths),
    });
  } catch (error) {
    if (error instanceof StepBudgetExceededError && !overtime.signal.aborted && !cancelled.signal.aborted) {
      // The model had not answered when the step's time ran out: nothing of the turn happened (no tool ran), so it is
      // simply redone in a fresh step, with a fresh budget.
      cancelled.stop();
      return { kind: "step_budget", state, now: workflowClock.now() };
    }
    if (overtime.signal.aborted && !cancelled.signal.aborted) {
      // Over the deadline: the turn is dropped (its state unchanged, so it runs again after an extension); the
      // workflow sees `now` past the deadline and pauses the run for a person (extend or cancel).
      cancelled.stop();
      return { kind: "continue", state, now: Math.max(workflowClock.now(), deadline ?? 0) + 1 };
    }
    if (!cancelled.signal.aborted) {
      cancelled.stop();
      if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
      throw error;
    }
  } finally {
    cancelled.stop();
    if (deadlineTimer) clearInterval(deadlineTimer);
  }
  // Cancelled while the turn ran: nothing of it is committed, and the sandbox goes (the tools may even have recreated
  // files in a worktree the cancellation already removed).
  const ended = cancelled.signal.aborted ? "cancelled" : await endedStatus(runId);
  if (ended || !result) {
    await sandbox.destroy().catch(() => null);
    await releaseSandbox(runSandbox(run, taskId, workspace)).catch(() => null);
    throw new RunEndedError((await endedStatus(runId)) ?? ended ?? "cancelled");
  }
  const events: NewRunEvent[] = [];
  const sent = prompt as PromptInfo | null;
  if (sent?.summarised && !state.contextSummarised) {
    // The first summarised prompt of this session is the run's record; later turns stay summarised silently.
    events.push({ type: "CONTEXT_SUMMARISED", payload: { ...sent.summarised, tokens: sent.tokens, budget: sent.budget } });
    result = { ...result, state: { ...result.state, contextSummarised: true } };
  }
  // Refusals under the policy (deny list, file caps) are the run's record too, not only the model's.
  for (const refusal of (result.state.refusals ?? []).slice(state.refusals?.length ?? 0)) {
    events.push({ type: "POLICY_REFUSED", payload: refusal });
  }
  for (const r of (result.state.reflections ?? []).slice(state.reflections?.length ?? 0)) {
    events.push({ type: "TASK_PROGRESS", payload: r });
  }
  // Graduated intervention (nudge, firm reminder, stop): each level the run's record too.
  for (const i of (result.state.interventions ?? []).slice(state.interventions?.length ?? 0)) {
    events.push({ type: "IMPLEMENTER_NUDGED", payload: { ...i, ...(taskId ? { taskId } : {}) } });
  }
  const before = new Map(state.todos.map((t) => [t.id, t.status]));
  // A parallel task's session has one todo: it is numbered as the plan numbers it.
  const total = taskId ? doc.tasks.length : result.state.todos.length;
  const indexOf = (todoIndex: number, id: string) => (taskId ? doc.tasks.findIndex((t) => t.id === id) : todoIndex) + 1;
  const finishing = result.state.todos.some((t) => t.status === "done" && before.get(t.id) !== "done");
  // A parallel task's closing turn (the model's summary, after its todo was checkpointed and checked) usually leaves
  // nothing new in the worktree: then it commits nothing — no empty "complete" commit on the task's branch, and none of
  // the secret scan, lookup, staging and commit (seven git processes) on the lane's way to its next task. One look (one
  // process) decides; a worktree with anything in it, or that cannot be looked at locally, is committed as before.
  const closingClean =
    !!taskId && result.kind === "done" && !finishing && sandbox.kind === "local" && (await nothingToCommit(sandbox));
  const commits = (finishing || result.kind === "done") && !closingClean;
  // Nothing holding a secret is committed: the changes since the last checkpoint are dropped, the run pauses with a
  // "secret detected" reason, and after a retry the turn is redone with a note telling the model why.
  const leaks = commits ? describeLeaks(await scanChangesForSecrets(sandbox)).map((f) => redact(f)) : [];
  if (leaks.length) {
    await rollbackToCheckpoint({ sandbox });
    const message = `Secret detected in ${leaks.join(", ")}: the changes since the last checkpoint were not committed. Retry to let the implementer redo them without the secret.`;
    const redo: ImplementerState = {
      ...state,
      messages: [
        ...state.messages,
        { role: "user", content: `${message} Never write credentials into files; read them from environment variables at run time.` },
      ],
    };
    return { kind: "secret_detected", state: redo, files: leaks, message, now: workflowClock.now() };
  }
  const earlier = commits ? await checkpointsOfUnrecordedRun(runId, stepKey, sandbox.location, taskId) : new Map<string, string>();
  const finished: string[] = [];
  for (const [index, todo] of result.state.todos.entries()) {
    const was = before.get(todo.id);
    if (todo.status === "in_progress" && was !== "in_progress") {
      events.push({ type: "TASK_STARTED", payload: { taskId: todo.id, index: indexOf(index, todo.id), total } });
    }
    if (todo.status === "done" && was !== "done") {
      const checkpoint = earlier.has(todo.id)
        ? { sha: earlier.get(todo.id)! }
        : await commitCheckpoint({ sandbox, runId, taskId: todo.id, title: todo.title });
      events.push({ type: "TASK_COMPLETED", payload: { taskId: todo.id, commitSha: checkpoint.sha } });
      finished.push(todo.id);
    }
  }
  // A run from a tasks.md keeps its checkboxes: each finished task is checked and committed after its checkpoint (a
  // parallel task's box is checked on the run branch when the task is merged).
  if (!taskId) await checkTasksFile(run, doc, finished, sandbox);
  if (result.kind === "done" && !closingClean) {
    const final = earlier.has("final")
      ? { sha: earlier.get("final")! }
      : await commitCheckpoint({ sandbox, runId, taskId: "final", title: taskId ? `task ${taskId} complete` : "implementation complete" });
    if (!taskId) events.push({ type: "IMPLEMENTATION_SUCCEEDED", payload: { attempt, commitSha: final.sha } });
  }
  if (result.kind === "failure") {
    // A command the turn left running has no one left to collect it.
    if (result.state.pendingCommand) await sandbox.killDetached?.(result.state.pendingCommand.id).catch(() => null);
    await rollbackToCheckpoint({ sandbox }).catch(() => null);
    if (!taskId) events.push({ type: "IMPLEMENTATION_FAILED", payload: { attempt, reason: redact(result.message) } });
  }
  if (events.length) await append(runId, stepKey, events);
  const now = workflowClock.now();
  result = { ...result, state: await storeConversation({ runId, base: state, loaded, next: result.state }) };
  // What the model said is stored as the step's result: redact it like everything else that is kept.
  if (result.kind === "failure") return { ...result, message: redact(result.message), now };
  if (result.kind === "done") return { ...result, summary: redact(result.summary), now };
  if (result.kind === "policy") return { ...result, action: redactDeep(result.action), now };
  if (result.kind === "replan") return { ...result, observation: redact(result.observation), proposal: redact(result.proposal), now };
  return { ...result, now };
}

export type CommandPollResult = WithNow<{ kind: "running" }> | WithNow<Extract<ImplementerTurnResult, { kind: "continue" | "policy" }>>;

/**
 * One look at the command a turn left running detached (state.pendingCommand), waiting for it at most the step's
 * budget. Once it has ended, its result joins the conversation exactly as an inline run's would (collectCommand), and
 * the state goes on without a pending command. Idempotent: a re-run step (after a crash) reads the same ended command
 * from the sandbox's files and appends the same result once, since the step's input state is the memoized one.
 */
export async function pollCommand({
  runId,
  stepKey,
  state,
  plan: doc,
  deadline,
  taskId = null,
  workspace = null,
}: {
  runId: string;
  stepKey: string;
  state: ImplementerState;
  plan: PlanDocument;
  /** The implementation stage's deadline (epoch ms): past it the command is killed, as an inline one would be. */
  deadline?: number;
  /** A parallel task's command: in the task's sandbox (its lane's, `workspace`, else its own). */
  taskId?: string | null;
  workspace?: string | null;
}): Promise<CommandPollResult> {
  const started = Date.now();
  const pending = state.pendingCommand;
  if (!pending) return { kind: "continue", state, now: workflowClock.now() };
  const run = await loadRun({ runId });
  const sandbox = await attachSandbox(runSandbox(run, taskId, workspace));
  if (!sandbox.detachedStatus || !sandbox.killDetached) {
    throw new AppError("internal:sandbox", "The run's sandbox cannot look up a command left running detached.");
  }
  const cancelled = watchForEnd(runId);
  let status;
  try {
    // Past the stage deadline the command is killed (it then reads as timed out), as an inline one would be.
    if (deadline !== undefined && workflowClock.now() > deadline) await sandbox.killDetached(pending.id);
    status = await waitDetached({ sandbox: { detachedStatus: sandbox.detachedStatus, killDetached: sandbox.killDetached }, id: pending.id, until: started + stepBudget.ms(), signal: cancelled.signal });
  } catch (error) {
    // A cancel kills the command (waitDetached) and ends the step.
    if (cancelled.signal.aborted) throw new RunEndedError((await endedStatus(runId)) ?? "cancelled");
    throw error;
  } finally {
    cancelled.stop();
  }
  if (status.state === "running") return { kind: "running", now: workflowClock.now() };
  const collected = await collectCommand({
    state,
    sandbox,
    result: status.result,
    policy: run.config.policy,
    scope: [...new Set(doc.tasks.flatMap((t) => t.files ?? []))],
    restore: (paths) => restoreFromCheckpoint(sandbox, paths),
  });
  const refusals = (collected.state.refusals ?? []).slice(state.refusals?.length ?? 0);
  if (refusals.length) await append(runId, stepKey, refusals.map((payload) => ({ type: "POLICY_REFUSED", payload })));
  const now = workflowClock.now();
  if (collected.hold) return { kind: "policy", state: collected.state, action: redactDeep(collected.hold), now };
  return { kind: "continue", state: collected.state, now };
}

/**
 * Task checkpoints that an earlier execution of this step committed before it crashed, taskId → sha ("final" for the
 * closing one), so that a re-run step reuses them instead of committing each task a second time: the ones its stored
 * events name (the crash came after they were written), and the checkpoint commits on the worktree's HEAD after the
 * newest commit any other event names (the crash came between the commit and the events).
 */
async function checkpointsOfUnrecordedRun(runId: string, stepKey: string, worktree: WorktreeLocation, taskId: string | null): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let known: string | null = null;
  for (const e of await listEvents({ runId, limit: 100_000 })) {
    const p = e.payload as { commitSha?: string | null; baseSha?: string | null; taskId?: string; stepKey?: string };
    if (p.stepKey === stepKey) {
      if (e.type === "TASK_COMPLETED" && p.commitSha && p.taskId) found.set(p.taskId, p.commitSha);
      if (e.type === "IMPLEMENTATION_SUCCEEDED" && p.commitSha) found.set("final", p.commitSha);
    } else if (taskId) {
      // A parallel task's branch holds only its own commits since it was cut (other tasks' commits are elsewhere).
      if (e.type === "TASK_BRANCH_CREATED" && p.taskId === taskId && p.baseSha) known = p.baseSha;
    } else if (e.type === "BRANCH_CREATED" && p.baseSha) known = p.baseSha;
    else if (["TASK_COMPLETED", "IMPLEMENTATION_SUCCEEDED", "PLAN_CREATED", "PLAN_EDITED"].includes(e.type) && p.commitSha) known = p.commitSha;
  }
  if (found.size > 0 || !known) return found;
  const format = "%H%x1f%(trailers:key=Gatehouse-Kind,valueonly,separator=)%x1f%(trailers:key=Gatehouse-Task,valueonly,separator=)";
  const out = await git(worktree.workTree, ["log", `--format=${format}`, `${known}..HEAD`], { allowFailure: true, worktree });
  for (const line of out.stdout.split("\n")) {
    const [sha, kind, task] = line.split("\x1f").map((v) => v?.trim());
    if (sha && kind === "checkpoint" && task && !found.has(task)) found.set(task, sha);
  }
  return found;
}

export async function diffSummary({ runId }: { runId: string }) {
  const run = await loadRun({ runId });
  const state = await getRunState({ id: runId });
  const base = await baseShaOf(runId);
  const stat = await git(run.repoPath, ["diff", ...DIFF_SAFE, "--stat", `${base ?? run.config.git.baseBranch}...${run.branch}`, "--", ".", ":(exclude).autonomous"], {
    allowFailure: true,
  });
  return { diffStat: stat.stdout.trim(), status: state?.status ?? null };
}
